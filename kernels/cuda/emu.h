/*
 * emu.h - just enough of the CUDA runtime and cuBLAS for the cuda
 * backend's sources to compile as plain C++ (g++ -x c++ -DNCF_CUDA_EMULATE)
 * and run on the CPU, so that `make check` exercises them on machines
 * without a GPU (and without the CUDA toolkit).
 *
 * What it is:
 *  - device memory is host memory: cudaMalloc is an aligned malloc filled
 *    with 0xFF bytes (NaNs, huge indices), so reading what was never
 *    written shows;
 *  - streams are queues.  Every operation on a stream (a kernel launch, a
 *    copy, a memset, a GEMM, a graph launch, a wait for an event) is an
 *    operation of its queue, run in stream order.  In the default, eager,
 *    mode an operation runs when it is issued (after what its stream holds),
 *    so work never runs late.  In lazy mode (ncf_emu_lazy = 1) it runs only
 *    when something waits for it: cudaStreamSynchronize, cudaEventSynchronize,
 *    cudaDeviceSynchronize, cudaFree, or a stream that waits for an event
 *    recorded after it.  Lazy mode is the most delayed schedule a GPU could
 *    choose, so a host read, a host write or a cross-stream use that is not
 *    ordered by a synchronisation or an event shows as a wrong result; eager
 *    mode is the least delayed, so work issued before its inputs were ready
 *    shows too.  Tests of the overlapped scoring path and of the training
 *    step run both;
 *  - a kernel launch (NCF_LAUNCH in common.cuh) evaluates its arguments when
 *    it is issued, as CUDA does, and later runs nested loops over the blocks
 *    and threads of the grid calling the kernel once per thread, one at a
 *    time, with blockIdx, threadIdx, blockDim and gridDim as thread_local
 *    globals;
 *  - a cooperative launch (NCF_LAUNCH_SYNC) takes its arguments the same
 *    way and, when it runs, runs each thread of a block as a fiber (its own
 *    stack) on the calling thread: a thread runs until it reaches
 *    __syncthreads() or __syncwarp(), then the next thread runs, and a
 *    barrier opens when every thread of its block (or warp) has reached it.
 *    __shared__ variables are static (one block runs at a time); dynamic
 *    shared memory is one buffer per launch, filled with 0xFF bytes (NaNs)
 *    before each block.  A thread that reads what another thread writes
 *    without a barrier in between reads what was there before (the other
 *    has not run yet), so missing barriers show as wrong results; a barrier
 *    that some threads of the block never reach (one returned early, or
 *    waits at another barrier) stops the program with a message, as it
 *    would hang a GPU;
 *  - cp.async (ncf_emu_cp_async, behind common.cuh's cp_async16): each
 *    thread's copies into shared memory wait in its own queue, grouped by
 *    its commits, and are made only when it waits for their group, so a
 *    thread that reads a staged tile before waiting for it (or another
 *    thread's before the barrier after that wait) reads what was there
 *    before: NaNs;
 *  - the tensor cores' warp instructions as PTX documents them: ldmatrix
 *    (.x4, .trans) and mma.sync (m16n8k16 bf16/fp16, m16n8k8 tf32, fp32
 *    accumulators) with their per-lane fragment layouts, the lanes of a
 *    warp exchanging their registers at a warp barrier, see "tensor cores"
 *    below;
 *  - graph capture (cudaStreamBeginCapture / EndCapture) records the
 *    operations issued to the capturing stream instead of running them;
 *    cudaGraphLaunch issues them as one operation, and cudaGraphExecUpdate
 *    swaps in the operations of a graph of the same kinds of operations in
 *    the same order (else it fails, as CUDA does for another topology).  As
 *    on a GPU, a synchronisation of the capturing stream, cudaMalloc,
 *    cudaFree or cudaFuncSetAttribute while this thread captures fails and
 *    invalidates the capture;
 *  - faults: __trap() in a kernel leaves cudaErrorLaunchFailure pending; the
 *    next synchronisation returns it and from then on it is sticky (every
 *    call returns it), as after a real device fault;
 *  - cuBLASLt's matmul (cublasLtMatmul and the descriptors, layouts and
 *    heuristic it needs) as cublasGemmEx, then the epilogues as cuBLAS
 *    documents them, in float before the output's rounding: BIAS (a value
 *    per row of D), RELU, RELU_AUX (a bit per element of D, 1 where the
 *    ReLU kept it, at bit i + j ld of the mask; the real layout is cuBLASLt's
 *    own and no code reads it but cuBLASLt), DRELU (D times the mask's bit),
 *    BGRADB (a value per column of D: the sum of op(B) over k, in k order);
 *  - cublasGemmEx is cblas_sgemm (OpenBLAS) with cuBLAS's column-major
 *    semantics, queued on the handle's stream; bf16 and fp16 operands are
 *    widened to float and the result is rounded back, so those precisions
 *    run too (with fp32 products instead of the tensor cores' rounding);
 *  - __nv_bfloat16 and __half are 16-bit structs whose conversions round to
 *    nearest even exactly as NVIDIA's __float2bfloat16_rn / __float2half_rn;
 *  - counters of what ran (kernel launches, GEMMs, memsets, copies), which
 *    the emulation test compares with the cost recorder's notes.
 *
 * What it is not: threads never run concurrently, so races that need two
 * threads at once do not show (what shows is a read before the barrier that
 * should have preceded it); warp shuffles and votes are not there (no kernel
 * compiled here uses them).  Kernels that need them are not compiled under
 * emulation; each has a CPU twin (<op>_cpu, such as sort_by_key_cpu for
 * CUB's radix sort), issued on the stream with ncf_emu_enqueue, and a
 * real-GPU test (tests/gpu).  Operations of different streams never overlap
 * in time, and a bad device pointer is an ordinary bad pointer (the ASan
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
#undef I /* <complex.h>, pulled in by OpenBLAS */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
 * cudaMemsetAsync and cudaMemcpyAsync operations (the blocking forms are
 * those on stream 0), each counted when it runs, so a graph's operations
 * count at each replay (the emulation test compares them with the cost
 * recorder's notes, kernels/cuda/cost.cuh). */
enum { NCF_EMU_LAUNCHES, NCF_EMU_GEMMS, NCF_EMU_MEMSETS, NCF_EMU_COPIES, NCF_EMU_COUNTS };
inline unsigned long ncf_emu_count[NCF_EMU_COUNTS];

/* Run body() once per thread of a (grid, block) launch, blocks in order,
 * threads in order within a block. */
template <typename F> static inline void ncf_emu_grid(dim3 grid, dim3 block, F body)
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

/* One thread's cp.async copies not yet made: 16 bytes from src to dst (or
 * zeros) when its group is waited for. */
enum { NCF_EMU_CP_MAX = 256 };
struct ncf_emu_cp {
	void *dst;
	const void *src;
	unsigned bytes; /* of src (the rest of the 16 zero) */
	unsigned group;
};

struct ncf_emu_fiber {
	ucontext_t uc;
	jmp_buf jb;
	int state, started;
	dim3 tid;
	char *stack;
	size_t size;
	void *fake; /* ASan's fake stack while switched away */
	struct ncf_emu_cp cp[NCF_EMU_CP_MAX];
	unsigned ncp, cp_group; /* copies queued; the group a copy joins now */
	unsigned coll;		/* warp collectives (ldmatrix, mma) it has made in this block */
};

/* What a lane gives a warp collective: ldmatrix's row address, or mma's A
 * and B registers. */
struct ncf_emu_xchg {
	const unsigned char *p;
	uint32_t a[4], b[2];
};

/* The fibers of a host thread, kept from launch to launch (each waits in
 * its loop for the next block to run), and the scheduler's context. */
enum { NCF_EMU_STACK = 256 << 10 }; /* bytes of a fiber's stack (lazily committed) */
struct ncf_emu_pool {
	struct ncf_emu_fiber f[1024];
	/* per warp, two collectives' worth (a lane can be one ahead), per lane */
	struct ncf_emu_xchg xchg[32][2][32];
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
static inline void ncf_emu_grid_sync(dim3 grid, dim3 block, size_t shmem, F body)
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
				for (unsigned k = 0; k < n; k++) {
					C.f[k].state = NCF_EMU_READY;
					C.f[k].ncp = C.f[k].cp_group = C.f[k].coll = 0;
				}
				do {
					for (unsigned k = 0; k < n; k++)
						if (C.f[k].state == NCF_EMU_READY)
							ncf_emu_resume(&C, k);
				} while (!ncf_emu_barriers(&C));
			}
	ncf_emu_coop_cur = NULL;
	free(C.smem);
}

/* ---- cp.async ------------------------------------------------------------ */

static inline struct ncf_emu_fiber *ncf_emu_me(const char *what)
{
	struct ncf_emu_coop *C = ncf_emu_coop_cur;
	if (!C)
		ncf_emu_die(what);
	return &C->f[C->cur];
}

/* Queue 16 bytes for dst: bytes (0..16) of them from src, the rest zero. */
static inline void ncf_emu_cp_async(void *dst, const void *src, unsigned bytes)
{
	struct ncf_emu_fiber *f = ncf_emu_me("cp.async in a plain launch (use NCF_LAUNCH_SYNC)");
	if (f->ncp == NCF_EMU_CP_MAX)
		ncf_emu_die("more cp.async copies in flight than the emulation keeps");
	if (((uintptr_t)dst | (bytes ? (uintptr_t)src : 0)) & 15u)
		ncf_emu_die("cp.async of 16 bytes needs 16-byte aligned addresses");
	f->cp[f->ncp++] = ncf_emu_cp{dst, src, bytes, f->cp_group};
}

/* The copies queued since the last commit form a group. */
static inline void ncf_emu_cp_commit(void)
{
	ncf_emu_me("cp.async.commit_group in a plain launch")->cp_group++;
}

/* Make the copies of every group but the newest `pending` committed ones
 * (uncommitted copies are not waited for, as on a GPU). */
static inline void ncf_emu_cp_wait(unsigned pending)
{
	struct ncf_emu_fiber *f = ncf_emu_me("cp.async.wait_group in a plain launch");
	unsigned keep = 0;
	for (unsigned k = 0; k < f->ncp; k++) {
		struct ncf_emu_cp *c = &f->cp[k];
		if (c->group + pending < f->cp_group) {
			unsigned char z[16];
			memset(z, 0, sizeof z);
			if (c->bytes)
				memcpy(z, c->src, c->bytes);
			memcpy(c->dst, z, 16);
		} else {
			f->cp[keep++] = *c;
		}
	}
	f->ncp = keep;
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

/* ---- tensor cores: ldmatrix and mma.sync --------------------------------
 *
 * The warp instructions of the PTX ISA that the fused kernels use
 * (mma.cuh), with the fragment layouts the ISA documents ("Warp-level
 * matrix load instruction: ldmatrix", "Matrix fragments for mma.m16n8k16",
 * "... mma.m16n8k8" with .tf32).  A collective: each lane posts what it
 * gives (a row address, its A and B registers) in its warp's exchange,
 * waits at a warp barrier for the others, then computes its own registers
 * from everyone's; the exchange alternates between two slots, since a lane
 * can be at most one collective ahead of the slowest.  So a fragment a
 * kernel loads or holds in the wrong lane or register gives a wrong result
 * here as on a GPU; the products are formed in float and added in k order
 * onto the accumulator (the tensor cores' own order and rounding differ:
 * tests bound that).
 */
enum { NCF_EMU_MMA_BF16, NCF_EMU_MMA_F16, NCF_EMU_MMA_TF32 };

/* This lane's slot of its warp's current collective, and the warp's
 * slots (32 lanes), after the lane has posted x and the warp has met. */
static inline const struct ncf_emu_xchg *ncf_emu_collective(const struct ncf_emu_xchg *x)
{
	struct ncf_emu_fiber *f = ncf_emu_me("a warp collective in a plain launch (NCF_LAUNCH_SYNC)");
	unsigned k = ncf_emu_coop_cur->cur, w = k / 32, par = f->coll++ % 2;
	struct ncf_emu_xchg *warp = ncf_emu_pool_cur->xchg[w][par];
	warp[k % 32] = *x;
	__syncwarp();
	return warp;
}

/* TF32: float rounded to 10 mantissa bits, to nearest, ties away from zero
 * (PTX cvt.rna.tf32.f32). */
static inline float ncf_emu_tf32(float f)
{
	uint32_t u = ncf_emu_f2u(f);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return f; /* inf, NaN */
	u = (u + 0x1000u) & 0xffffe000u;
	return ncf_emu_u2f(u);
}

/* 16 bits at p. */
static inline uint32_t ncf_emu_u16(const unsigned char *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8j..8j+7 name
 * the rows of matrix j (16 bytes each); r[j] gets this lane's (row l/4,
 * b16 columns 2(l%4), +1), or with trans (rows 2(l%4), +1, column l/4),
 * the lower column (row) in the low half. */
static inline void ncf_emu_ldmatrix(uint32_t r[4], const unsigned char *addr, int trans)
{
	struct ncf_emu_xchg x = {addr, {0, 0, 0, 0}, {0, 0}};
	if ((uintptr_t)addr & 15u)
		ncf_emu_die("ldmatrix: a row address that is not 16-byte aligned");
	const struct ncf_emu_xchg *w = ncf_emu_collective(&x);
	unsigned l = ncf_emu_lane();
	for (unsigned j = 0; j < 4; j++) {
		if (!trans) {
			memcpy(&r[j], w[8 * j + l / 4].p + 4 * (l % 4), 4);
			continue;
		}
		const unsigned char *r0 = w[8 * j + 2 * (l % 4)].p, *r1 = w[8 * j + 2 * (l % 4) + 1].p;
		r[j] = ncf_emu_u16(r0 + 2 * (l / 4)) | ncf_emu_u16(r1 + 2 * (l / 4)) << 16;
	}
}

/* Element (row i, column k) of A (16 x K), (k, n) of B (K x 8) from the
 * warp's registers as mma's fragments hold them. */
static inline float ncf_emu_mma_elem(const struct ncf_emu_xchg *w, int kind, int a, unsigned i,
				     unsigned k)
{
	if (kind == NCF_EMU_MMA_TF32) {
		uint32_t v = a ? w[(i % 8) * 4 + k % 4].a[i / 8 + 2 * (k / 4)]
			       : w[i * 4 + k % 4].b[k / 4]; /* i: the column n */
		return ncf_emu_u2f(v);
	}
	uint32_t v = a ? w[(i % 8) * 4 + (k % 8) / 2].a[i / 8 + 2 * (k / 8)]
		       : w[i * 4 + (k % 8) / 2].b[k / 8];
	__nv_bfloat16 hb;
	__half hh;
	hb.x = hh.x = (uint16_t)(k % 2 ? v >> 16 : v & 0xFFFFu);
	return kind == NCF_EMU_MMA_BF16 ? __bfloat162float(hb) : __half2float(hh);
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (m16n8k8 .tf32):
 * d (this lane's (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)) += A B. */
static inline void ncf_emu_mma(float d[4], const uint32_t a[4], const uint32_t b[2], int kind)
{
	struct ncf_emu_xchg x = {NULL, {a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
	const struct ncf_emu_xchg *w = ncf_emu_collective(&x);
	unsigned l = ncf_emu_lane(), g = l / 4, t = l % 4, K = kind == NCF_EMU_MMA_TF32 ? 8 : 16;
	for (unsigned e = 0; e < 4; e++) {
		unsigned i = g + 8 * (e / 2), n = 2 * t + e % 2;
		float acc = d[e];
		for (unsigned k = 0; k < K; k++)
			acc += ncf_emu_mma_elem(w, kind, 1, i, k) * ncf_emu_mma_elem(w, kind, 0, n, k);
		d[e] = acc;
	}
}

/* ---- runtime: errors ---------------------------------------------------- */

typedef int cudaError_t;
enum {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorIllegalState = 401,
	cudaErrorNotReady = 600,
	cudaErrorIllegalAddress = 700,
	cudaErrorLaunchTimeout = 702,
	cudaErrorAssert = 710,
	cudaErrorHardwareStackError = 714,
	cudaErrorIllegalInstruction = 715,
	cudaErrorMisalignedAddress = 716,
	cudaErrorInvalidAddressSpace = 717,
	cudaErrorInvalidPc = 718,
	cudaErrorLaunchFailure = 719,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
	cudaErrorGraphExecUpdateFailure = 910,
};

static inline const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorIllegalState:
		return "the operation cannot be performed in the present state";
	case cudaErrorIllegalAddress:
		return "an illegal memory access was encountered";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	case cudaErrorGraphExecUpdateFailure:
		return "the graph update was not performed because it included changes which "
		       "violated constraints specific to instantiated graph update";
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
	case cudaErrorIllegalState:
		return "cudaErrorIllegalState";
	case cudaErrorIllegalAddress:
		return "cudaErrorIllegalAddress";
	case cudaErrorLaunchFailure:
		return "cudaErrorLaunchFailure";
	case cudaErrorStreamCaptureUnsupported:
		return "cudaErrorStreamCaptureUnsupported";
	case cudaErrorStreamCaptureInvalidated:
		return "cudaErrorStreamCaptureInvalidated";
	case cudaErrorGraphExecUpdateFailure:
		return "cudaErrorGraphExecUpdateFailure";
	default:
		return "cudaErrorInvalidValue";
	}
}

/* A device fault raised by a kernel and not yet seen by a synchronisation;
 * the sticky error every call returns once one has; the last error of a
 * call (cudaGetLastError). */
inline cudaError_t ncf_emu_pending = cudaSuccess, ncf_emu_sticky = cudaSuccess,
		   ncf_emu_last = cudaSuccess;

/* Inside a kernel: stop with a fault (cudaErrorLaunchFailure). */
static inline void __trap(void)
{
	if (!ncf_emu_pending)
		ncf_emu_pending = cudaErrorLaunchFailure;
}

static inline cudaError_t cudaGetLastError(void)
{
	cudaError_t e = ncf_emu_sticky ? ncf_emu_sticky : ncf_emu_last;
	ncf_emu_last = cudaSuccess;
	return e;
}
static inline cudaError_t cudaPeekAtLastError(void)
{
	return ncf_emu_sticky ? ncf_emu_sticky : ncf_emu_last;
}
/* What a synchronisation returns: a pending fault becomes sticky. */
static inline cudaError_t ncf_emu_synced(void)
{
	if (ncf_emu_pending) {
		ncf_emu_sticky = ncf_emu_pending;
		ncf_emu_pending = cudaSuccess;
	}
	return ncf_emu_sticky;
}
/* Return e from a call, remembering it for cudaGetLastError. */
static inline cudaError_t ncf_emu_ret(cudaError_t e)
{
	if (e)
		ncf_emu_last = e;
	return ncf_emu_sticky ? ncf_emu_sticky : e;
}

/* ---- runtime: streams, events, graphs ----------------------------------- */

/* What an operation is, for cudaGraphExecUpdate (a graph's topology): a
 * kernel launch, a copy, a memset, a GEMM, or other work of the host (a CPU
 * twin, a graph launched inside a capture). */
enum { NCF_EMU_OP_KERNEL, NCF_EMU_OP_COPY, NCF_EMU_OP_MEMSET, NCF_EMU_OP_GEMM, NCF_EMU_OP_HOST };

struct ncf_emu_graph {
	std::vector<std::function<void()>> ops;
	std::vector<int> kinds; /* NCF_EMU_OP_*, one per operation */
};

/* One queued operation: fn, or (wait != NULL) a wait for the first seq
 * operations of stream wait. */
struct ncf_emu_stream;
struct ncf_emu_op {
	std::function<void()> fn;
	ncf_emu_stream *wait;
	uint64_t seq;
};

struct ncf_emu_stream {
	std::deque<ncf_emu_op> q; /* issued, not yet run */
	uint64_t issued = 0, done = 0;
	ncf_emu_graph *capture = nullptr; /* capturing into */
	int capture_bad = 0;		 /* the capture was invalidated */
};
typedef ncf_emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 1

struct ncf_emu_event {
	ncf_emu_stream *s = nullptr; /* recorded on, NULL: never */
	uint64_t seq = 0;	     /* after this many operations of s */
	double t = 0;		     /* when the stream got to it (seconds, monotonic clock) */
};
typedef ncf_emu_event *cudaEvent_t;
#define cudaEventDefault 0
#define cudaEventDisableTiming 2

/* 1: run operations as late as possible (see the top of the file); the
 * environment's NCF_EMU_LAZY=1 sets it at start. */
inline int ncf_emu_lazy = getenv("NCF_EMU_LAZY") && !strcmp(getenv("NCF_EMU_LAZY"), "1");
inline ncf_emu_stream ncf_emu_legacy; /* stream 0 */
inline std::vector<ncf_emu_stream *> ncf_emu_streams;
inline thread_local ncf_emu_stream *ncf_emu_capturing = nullptr;

static inline ncf_emu_stream *ncf_emu_s(cudaStream_t s)
{
	return s ? s : &ncf_emu_legacy;
}

/* Run the operations of s up to the upto-th. */
static inline void ncf_emu_run(ncf_emu_stream *s, uint64_t upto)
{
	while (s->done < upto && !s->q.empty()) {
		ncf_emu_op op = std::move(s->q.front());
		s->q.pop_front();
		if (op.wait)
			ncf_emu_run(op.wait, op.seq);
		else
			op.fn();
		s->done++;
	}
}

static inline void ncf_emu_run_all(void)
{
	ncf_emu_run(&ncf_emu_legacy, ncf_emu_legacy.issued);
	for (size_t k = 0; k < ncf_emu_streams.size(); k++)
		ncf_emu_run(ncf_emu_streams[k], ncf_emu_streams[k]->issued);
}

/* Issue fn on stream st: recorded when st captures, else run now (eager)
 * or queued (lazy).  CPU twins of GPU-only kernels use it too.  kind: what
 * the operation is (NCF_EMU_OP_*). */
static inline cudaError_t ncf_emu_enqueue(cudaStream_t st, std::function<void()> fn,
					  int kind = NCF_EMU_OP_HOST)
{
	ncf_emu_stream *s = ncf_emu_s(st);
	if (s->capture) {
		s->capture->ops.push_back(std::move(fn));
		s->capture->kinds.push_back(kind);
		return cudaSuccess;
	}
	s->issued++;
	if (!ncf_emu_lazy) {
		ncf_emu_run(s, s->issued - 1);
		fn();
		s->done++;
	} else {
		s->q.push_back(ncf_emu_op{std::move(fn), nullptr, 0});
	}
	return ncf_emu_sticky;
}

/* A call that this thread may not make while it captures (it would
 * synchronise or allocate): fails and invalidates the capture. */
static inline int ncf_emu_capture_forbids(void)
{
	if (!ncf_emu_capturing)
		return 0;
	ncf_emu_capturing->capture_bad = 1;
	ncf_emu_last = cudaErrorStreamCaptureUnsupported;
	return 1;
}

/*
 * A kernel launch: the arguments converted to the kernel's parameter types
 * now, the grid run when the stream gets to it.
 */
template <typename... P, typename... A>
static inline void ncf_emu_launch(cudaStream_t st, dim3 grid, dim3 block, void (*kernel)(P...),
				  A &&...a)
{
	std::tuple<std::decay_t<P>...> args(std::forward<A>(a)...);
	ncf_emu_enqueue(
		st, [=]() { ncf_emu_grid(grid, block, [&]() { std::apply(kernel, args); }); },
		NCF_EMU_OP_KERNEL);
}

/* A cooperative launch (NCF_LAUNCH_SYNC): the same, with shmem bytes of
 * dynamic shared memory, its threads run as fibers. */
template <typename... P, typename... A>
static inline void ncf_emu_launch_sync(cudaStream_t st, dim3 grid, dim3 block, size_t shmem,
				       void (*kernel)(P...), A &&...a)
{
	std::tuple<std::decay_t<P>...> args(std::forward<A>(a)...);
	ncf_emu_enqueue(
		st,
		[=]() {
			ncf_emu_grid_sync(grid, block, shmem, [&]() { std::apply(kernel, args); });
		},
		NCF_EMU_OP_KERNEL);
}

static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
	*s = new ncf_emu_stream;
	ncf_emu_streams.push_back(*s);
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	if (!s)
		return ncf_emu_ret(cudaErrorInvalidValue);
	ncf_emu_run(s, s->issued);
	ncf_emu_streams.erase(std::remove(ncf_emu_streams.begin(), ncf_emu_streams.end(), s),
			      ncf_emu_streams.end());
	delete s->capture;
	delete s;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	ncf_emu_stream *s = ncf_emu_s(st);
	if (s->capture) {
		s->capture_bad = 1;
		return ncf_emu_ret(cudaErrorStreamCaptureUnsupported);
	}
	ncf_emu_run(s, s->issued);
	return ncf_emu_synced();
}
static inline cudaError_t cudaDeviceSynchronize(void)
{
	if (ncf_emu_capture_forbids())
		return ncf_emu_ret(cudaErrorStreamCaptureUnsupported);
	ncf_emu_run_all();
	return ncf_emu_synced();
}

static inline cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = new ncf_emu_event;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned)
{
	return cudaEventCreate(e);
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	if (e->s) /* its time stamp may still be queued */
		ncf_emu_run(e->s, e->seq);
	delete e;
	return ncf_emu_ret(cudaSuccess);
}
/* An operation of its own that notes the time when the stream gets to it
 * (so that cudaEventElapsedTime measures the emulated work between two
 * events); during a capture nothing (a graph here is one stream). */
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
	ncf_emu_stream *s = ncf_emu_s(st);
	if (!s->capture) {
		e->s = s;
		ncf_emu_enqueue(st, [e]() {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			e->t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
		});
		e->seq = s->issued;
	}
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned)
{
	ncf_emu_stream *s = ncf_emu_s(st);
	if (!e->s || s->capture)
		return ncf_emu_ret(cudaSuccess);
	s->issued++;
	if (!ncf_emu_lazy) {
		ncf_emu_run(s, s->issued - 1);
		ncf_emu_run(e->s, e->seq);
		s->done++;
	} else {
		s->q.push_back(ncf_emu_op{nullptr, e->s, e->seq});
	}
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (e->s)
		ncf_emu_run(e->s, e->seq);
	return ncf_emu_synced();
}
/* The host time of the emulated work between two recorded events. */
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	if (!a->s || !b->s)
		return ncf_emu_ret(cudaErrorInvalidValue);
	ncf_emu_run(a->s, a->seq);
	ncf_emu_run(b->s, b->seq);
	*ms = (float)(1e3 * (b->t - a->t));
	return ncf_emu_ret(cudaSuccess);
}

enum cudaStreamCaptureMode {
	cudaStreamCaptureModeGlobal = 0,
	cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
	cudaStreamCaptureStatusNone = 0,
	cudaStreamCaptureStatusActive = 1,
	cudaStreamCaptureStatusInvalidated = 2,
};
typedef ncf_emu_graph *cudaGraph_t;
struct ncf_emu_graph_exec {
	std::shared_ptr<std::vector<std::function<void()>>> ops;
	std::vector<int> kinds;
};
typedef ncf_emu_graph_exec *cudaGraphExec_t;

static inline cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode)
{
	if (!st || st->capture || ncf_emu_capturing)
		return ncf_emu_ret(cudaErrorIllegalState);
	st->capture = new ncf_emu_graph;
	st->capture_bad = 0;
	ncf_emu_capturing = st;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
	*g = nullptr;
	if (!st || !st->capture)
		return ncf_emu_ret(cudaErrorIllegalState);
	ncf_emu_graph *got = st->capture;
	st->capture = nullptr;
	if (ncf_emu_capturing == st)
		ncf_emu_capturing = nullptr;
	if (st->capture_bad) {
		delete got;
		return ncf_emu_ret(cudaErrorStreamCaptureInvalidated);
	}
	*g = got;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t st, cudaStreamCaptureStatus *cs)
{
	ncf_emu_stream *s = ncf_emu_s(st);
	*cs = !s->capture ? cudaStreamCaptureStatusNone
	      : s->capture_bad ? cudaStreamCaptureStatusInvalidated
			       : cudaStreamCaptureStatusActive;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
					       unsigned long long)
{
	if (!g)
		return ncf_emu_ret(cudaErrorInvalidValue);
	*x = new ncf_emu_graph_exec;
	(*x)->ops = std::make_shared<std::vector<std::function<void()>>>(g->ops);
	(*x)->kinds = g->kinds;
	return ncf_emu_ret(cudaSuccess);
}

enum cudaGraphExecUpdateResult {
	cudaGraphExecUpdateSuccess = 0,
	cudaGraphExecUpdateError = 1,
	cudaGraphExecUpdateErrorTopologyChanged = 2,
};
struct cudaGraphExecUpdateResultInfo {
	cudaGraphExecUpdateResult result;
	void *errorNode, *errorFromNode;
};
/* The operations of g into x, when g has x's kinds of operations in x's
 * order (CUDA's rule is per node and edge; one stream's operations in order
 * are what a graph is here); else cudaErrorGraphExecUpdateFailure and x as
 * it was.  A launch of x already issued keeps the operations it had. */
static inline cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
					      cudaGraphExecUpdateResultInfo *info)
{
	if (info)
		memset(info, 0, sizeof *info);
	if (!x || !g)
		return ncf_emu_ret(cudaErrorInvalidValue);
	if (x->kinds != g->kinds) {
		if (info)
			info->result = cudaGraphExecUpdateErrorTopologyChanged;
		return ncf_emu_ret(cudaErrorGraphExecUpdateFailure);
	}
	x->ops = std::make_shared<std::vector<std::function<void()>>>(g->ops);
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	delete x; /* a launch still queued holds its own reference to the operations */
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st)
{
	if (!x)
		return ncf_emu_ret(cudaErrorInvalidValue);
	std::shared_ptr<std::vector<std::function<void()>>> ops = x->ops;
	return ncf_emu_enqueue(st, [ops]() {
		for (size_t k = 0; k < ops->size(); k++)
			(*ops)[k]();
	});
}

/* ---- runtime: memory ----------------------------------------------------- */

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

static inline cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = NULL;
	if (ncf_emu_capture_forbids())
		return ncf_emu_ret(cudaErrorStreamCaptureUnsupported);
	if (posix_memalign(p, 256, n ? n : 1) != 0)
		return ncf_emu_ret(cudaErrorMemoryAllocation);
	/* device memory starts as garbage: fill it with NaNs (and huge
	 * indices), so that reading what was never written shows */
	memset(*p, 0xFF, n);
	return ncf_emu_ret(cudaSuccess);
}
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t n)
{
	return cudaMalloc((void **)p, n);
}
/* cudaFree waits for the device, as it does on a GPU. */
static inline cudaError_t cudaFree(void *p)
{
	if (ncf_emu_capture_forbids())
		return ncf_emu_ret(cudaErrorStreamCaptureUnsupported);
	ncf_emu_run_all();
	free(p);
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaMalloc(p, n);
}
static inline cudaError_t cudaFreeHost(void *p)
{
	return cudaFree(p);
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind,
					  cudaStream_t s)
{
	if (!n)
		return ncf_emu_ret(cudaSuccess);
	return ncf_emu_enqueue(
		s,
		[=]() {
			ncf_emu_count[NCF_EMU_COPIES]++;
			memmove(dst, src, n);
		},
		NCF_EMU_OP_COPY);
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
	if (!n)
		return ncf_emu_ret(cudaSuccess);
	return ncf_emu_enqueue(
		s,
		[=]() {
			ncf_emu_count[NCF_EMU_MEMSETS]++;
			memset(p, v, n);
		},
		NCF_EMU_OP_MEMSET);
}
/* The blocking forms: after everything issued so far. */
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
	cudaError_t e = cudaMemcpyAsync(dst, src, n, k, NULL);
	return e ? e : cudaDeviceSynchronize();
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n)
{
	cudaError_t e = cudaMemsetAsync(p, v, n, NULL);
	return e ? e : cudaDeviceSynchronize();
}

/* Kernel attributes: only the dynamic shared memory limit, which the
 * emulation does not have; not while this thread captures (as on a GPU,
 * where the step sets it before any capture, step_prepare). */
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <typename K> static inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int)
{
	if (ncf_emu_capture_forbids())
		return ncf_emu_ret(cudaErrorStreamCaptureUnsupported);
	return ncf_emu_ret(cudaSuccess);
}

/* Integer atomics (threads run one at a time). */
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
	unsigned long long old = *p;
	if (v < old)
		*p = v;
	return old;
}

/* ---- runtime: devices ---------------------------------------------------- */

/* Devices the emulation says it has (tests change it). */
inline int ncf_emu_devices = 1;

static inline cudaError_t cudaGetDeviceCount(int *n)
{
	*n = ncf_emu_devices;
	return ncf_emu_ret(cudaSuccess);
}
static inline cudaError_t cudaSetDevice(int d)
{
	return ncf_emu_ret(d >= 0 && d < ncf_emu_devices ? cudaSuccess : cudaErrorInvalidValue);
}
static inline cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return ncf_emu_ret(cudaSuccess);
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
static inline cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	*free_b = *total = (size_t)1 << 34;
	return ncf_emu_ret(cudaSuccess);
}

struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	int major, minor;
	int multiProcessorCount;
	int memoryBusWidth;
	int l2CacheSize;
	size_t sharedMemPerMultiprocessor, sharedMemPerBlockOptin;
};
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
	if (d < 0 || d >= ncf_emu_devices)
		return ncf_emu_ret(cudaErrorInvalidValue);
	memset(p, 0, sizeof *p);
	strcpy(p->name, "CPU emulation (NCF_CUDA_EMULATE)");
	p->totalGlobalMem = (size_t)1 << 34;
	p->major = 9; /* claims bf16 and tf32, which the emulation runs as described above */
	p->minor = 0;
	p->sharedMemPerMultiprocessor = 233472; /* an H100's, as the kernels size their tiles */
	p->sharedMemPerBlockOptin = 232448;
	p->multiProcessorCount = 1;
	return ncf_emu_ret(cudaSuccess);
}
enum cudaDeviceAttr {
	cudaDevAttrClockRate = 13,
	cudaDevAttrMemoryClockRate = 36,
	cudaDevAttrGlobalMemoryBusWidth = 37,
};
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int)
{
	*v = 0;
	return ncf_emu_ret(cudaSuccess);
}

/* Tests: forget every fault (a GPU would need a new process). */
static inline void ncf_emu_reset_faults(void)
{
	ncf_emu_pending = ncf_emu_sticky = ncf_emu_last = cudaSuccess;
}

/* ---- cuBLAS ------------------------------------------------------------- */

struct ncf_emu_blas {
	cudaStream_t s = nullptr;
};
typedef ncf_emu_blas *cublasHandle_t;
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

/* Tests: cublasGemmEx refuses to be captured (CUBLAS_STATUS_NOT_SUPPORTED)
 * while this is set, as a cuBLAS without a workspace of its own would. */
inline int ncf_emu_blas_no_capture = 0;

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
	*h = new ncf_emu_blas;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	h->s = s;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t)
{
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t)
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


/* A product as cuBLAS takes it: C (m, n) = al op(A) op(B) + be C,
 * column-major, each operand with its type and leading dimension. */
struct ncf_emu_mat {
	const void *p;
	cudaDataType t;
	int ld;
};
struct ncf_emu_product {
	cublasOperation_t ta, tb;
	int m, n, k;
	float al, be;
	struct ncf_emu_mat A, B, C;
};

/* C of g, now (see cublasGemmEx). */
static inline void ncf_emu_gemm(const struct ncf_emu_product *g)
{
	int m = g->m, n = g->n, k = g->k, ldc = g->C.ld;
	int arows = g->ta == CUBLAS_OP_N ? m : k, acols = g->ta == CUBLAS_OP_N ? k : m;
	int brows = g->tb == CUBLAS_OP_N ? k : n, bcols = g->tb == CUBLAS_OP_N ? n : k;
	float *a = ncf_emu_widen(g->A.p, g->A.t, arows, acols, g->A.ld);
	float *b = ncf_emu_widen(g->B.p, g->B.t, brows, bcols, g->B.ld);
	float *c = ncf_emu_widen(g->C.p, g->C.t, m, n, ldc);
	if (k == 0) {
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++)
				c[(size_t)j * ldc + i] =
					g->be == 0.0f ? 0.0f : g->be * c[(size_t)j * ldc + i];
	} else {
		cblas_sgemm(CblasColMajor, g->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
			    g->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, g->al, a,
			    g->A.ld, b, g->B.ld, g->be, c, ldc);
	}
	if (g->C.t != CUDA_R_32F) {
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++)
				ncf_emu_store((void *)g->C.p, g->C.t, (size_t)j * ldc + i,
					      c[(size_t)j * ldc + i]);
		free(c);
	}
	if (a != g->A.p)
		free(a);
	if (b != g->B.p)
		free(b);
}

/*
 * C (m, n) = alpha op(A) op(B) + beta C, column-major, op(A) (m, k),
 * op(B) (k, n): cuBLAS's semantics on cblas_sgemm, checked now and queued
 * on the handle's stream (alpha and beta are read now, as cuBLAS does with
 * host pointers).  Types: 32F, 16BF, 16F operands, 32F or the operands'
 * type for C; the compute type is always float here.
 */
static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
					  cublasOperation_t tb, int m, int n, int k,
					  const void *alpha, const void *A, cudaDataType at, int lda,
					  const void *B, cudaDataType bt, int ldb, const void *beta,
					  void *C, cudaDataType ct, int ldc, cublasComputeType_t,
					  cublasGemmAlgo_t)
{
	if (m < 0 || n < 0 || k < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	int arows = ta == CUBLAS_OP_N ? m : k;
	int brows = tb == CUBLAS_OP_N ? k : n;
	if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
	    ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (ncf_emu_blas_no_capture && ncf_emu_s(h->s)->capture)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	float al = *(const float *)alpha, be = *(const float *)beta;
	ncf_emu_enqueue(
		h->s,
		[=]() {
			ncf_emu_count[NCF_EMU_GEMMS]++;
			struct ncf_emu_product g = {ta, tb, m, n, k, al, be, {A, at, lda}, {B, bt, ldb},
						    {C, ct, ldc}};
			ncf_emu_gemm(&g);
		},
		NCF_EMU_OP_GEMM);
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt ------------------------------------------------------------- */

typedef struct ncf_emu_blas *cublasLtHandle_t;
typedef enum {
	CUBLASLT_EPILOGUE_DEFAULT = 1,
	CUBLASLT_EPILOGUE_RELU = 2,
	CUBLASLT_EPILOGUE_BIAS = 4,
	CUBLASLT_EPILOGUE_RELU_BIAS = 6,
	CUBLASLT_EPILOGUE_RELU_AUX = 130,
	CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 134,
	CUBLASLT_EPILOGUE_DRELU = 136,
	CUBLASLT_EPILOGUE_DRELU_BGRAD = 152,
	CUBLASLT_EPILOGUE_BGRADA = 256,
	CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;
typedef enum {
	CUBLASLT_MATMUL_DESC_TRANSA = 3,
	CUBLASLT_MATMUL_DESC_TRANSB = 4,
	CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
	CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
	CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
} cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 } cublasLtMatmulPreferenceAttributes_t;
struct ncf_emu_lt_desc {
	cublasComputeType_t compute;
	cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
	int epilogue = CUBLASLT_EPILOGUE_DEFAULT;
	const void *bias = nullptr;
	cudaDataType bias_t = CUDA_R_32F; /* when bias_set; else D's type */
	bool bias_set = false;
	void *aux = nullptr;
	int64_t aux_ld = 0;
};
typedef ncf_emu_lt_desc *cublasLtMatmulDesc_t;
struct ncf_emu_lt_layout {
	cudaDataType t;
	uint64_t rows, cols;
	int64_t ld;
};
typedef ncf_emu_lt_layout *cublasLtMatrixLayout_t;
typedef struct {
	size_t workspace;
} *cublasLtMatmulPreference_t;
typedef struct {
	uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	*h = new ncf_emu_blas;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
						      cublasComputeType_t ct, cudaDataType)
{
	*d = new ncf_emu_lt_desc;
	(*d)->compute = ct;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	delete d;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
							    cublasLtMatmulDescAttributes_t a,
							    const void *buf, size_t size)
{
	switch (a) {
	case CUBLASLT_MATMUL_DESC_TRANSA:
		memcpy(&d->ta, buf, sizeof d->ta);
		break;
	case CUBLASLT_MATMUL_DESC_TRANSB:
		memcpy(&d->tb, buf, sizeof d->tb);
		break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		memcpy(&d->epilogue, buf, sizeof d->epilogue);
		break;
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		memcpy(&d->bias, buf, sizeof d->bias);
		break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
		memcpy(&d->aux, buf, sizeof d->aux);
		break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
		memcpy(&d->aux_ld, buf, sizeof d->aux_ld);
		break;
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
		memcpy(&d->bias_t, buf, sizeof d->bias_t);
		d->bias_set = true;
		break;
	default:
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	(void)size;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
							uint64_t rows, uint64_t cols, int64_t ld)
{
	if (ld < (int64_t)(rows > 1 ? rows : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	*l = new ncf_emu_lt_layout{t, rows, cols, ld};
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	delete l;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	*p = (cublasLtMatmulPreference_t)calloc(1, sizeof **p);
	return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
				     cublasLtMatmulPreferenceAttributes_t a, const void *buf, size_t)
{
	if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
		memcpy(&p->workspace, buf, sizeof p->workspace);
	return CUBLAS_STATUS_SUCCESS;
}
/* One "algorithm": the emulation's. */
static inline cublasStatus_t
cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
			       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
			       cublasLtMatmulPreference_t, int requested,
			       cublasLtMatmulHeuristicResult_t *res, int *found)
{
	*found = 0;
	if (requested < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(res, 0, sizeof *res);
	res->state = CUBLAS_STATUS_SUCCESS;
	res->wavesCount = 1.0f;
	*found = 1;
	return CUBLAS_STATUS_SUCCESS;
}

/* The bit of element (i, j) of a ReLU mask of leading dimension ld. */
static inline int ncf_emu_aux_bit(const ncf_emu_lt_desc *d, int i, int j)
{
	size_t bit = (size_t)i + (size_t)j * (size_t)d->aux_ld;
	return ((const unsigned char *)d->aux)[bit / 8] >> (bit % 8) & 1;
}
static inline void ncf_emu_aux_set(const ncf_emu_lt_desc *d, int i, int j, int keep)
{
	size_t bit = (size_t)i + (size_t)j * (size_t)d->aux_ld;
	unsigned char *mask = (unsigned char *)d->aux, m = (unsigned char)(1u << (bit % 8));
	mask[bit / 8] = keep ? mask[bit / 8] | m : mask[bit / 8] & (unsigned char)~m;
}

/* The epilogue of D (m, n) in float c (ld m) as cuBLAS documents it: BIAS
 * (a value per row of D), RELU (RELU_AUX: the mask written), DRELU (D
 * times the mask's bit) with BGRAD (a value per row of D: the sum over its
 * columns, in order). */
static inline void ncf_emu_lt_epilogue(const ncf_emu_lt_desc *d, int m, int n, float *c,
				       cudaDataType bias_t)
{
	int e = d->epilogue, drelu = e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float *x = &c[(size_t)j * m + i];
			if (e & CUBLASLT_EPILOGUE_BIAS)
				*x += ncf_emu_load(d->bias, bias_t, (size_t)i);
			if (drelu && !ncf_emu_aux_bit(d, i, j))
				*x = 0.0f;
			if (drelu || !(e & CUBLASLT_EPILOGUE_RELU))
				continue;
			int keep = *x > 0.0f;
			*x = keep ? *x : 0.0f;
			if (e & 128)
				ncf_emu_aux_set(d, i, j, keep);
		}
	if (e != CUBLASLT_EPILOGUE_DRELU_BGRAD)
		return;
	for (int i = 0; i < m; i++) {
		float acc = 0.0f;
		for (int j = 0; j < n; j++)
			acc += c[(size_t)j * m + i];
		ncf_emu_store((void *)d->bias, bias_t, (size_t)i, acc);
	}
}

/* D = alpha op(A) op(B) + beta C with the epilogue (C = D here: in place),
 * queued on the stream. */
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d,
					    const void *alpha, const void *A,
					    cublasLtMatrixLayout_t al, const void *B,
					    cublasLtMatrixLayout_t bl, const void *beta, const void *C,
					    cublasLtMatrixLayout_t, void *D, cublasLtMatrixLayout_t dl,
					    const cublasLtMatmulAlgo_t *, void *, size_t,
					    cudaStream_t stream)
{
	int m = (int)dl->rows, n = (int)dl->cols;
	int k = (int)(d->ta == CUBLAS_OP_N ? al->cols : al->rows);
	if ((int)(d->tb == CUBLAS_OP_N ? bl->rows : bl->cols) != k || C != D)
		return CUBLAS_STATUS_INVALID_VALUE;
	if ((d->epilogue & 128) && (d->aux_ld < m || d->aux_ld % 128 || !d->aux))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (ncf_emu_blas_no_capture && ncf_emu_s(stream)->capture)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	float a_ = *(const float *)alpha, b_ = *(const float *)beta;
	ncf_emu_lt_desc desc = *d; /* its pointers as they are now */
	struct ncf_emu_product g = {desc.ta, desc.tb, m, n, k, a_, b_, {A, al->t, (int)al->ld},
				    {B, bl->t, (int)bl->ld}, {NULL, CUDA_R_32F, m}};
	ncf_emu_lt_layout D_ = *dl;
	cudaDataType bias_t = desc.bias_set ? desc.bias_t : D_.t;
	ncf_emu_enqueue(
		stream,
		[=]() {
			ncf_emu_count[NCF_EMU_GEMMS]++;
			float *cw = (float *)calloc((size_t)m * (size_t)(n > 0 ? n : 1), sizeof(float));
			struct ncf_emu_product p = g;
			p.C.p = cw;
			ncf_emu_gemm(&p);
			ncf_emu_lt_epilogue(&desc, m, n, cw, bias_t);
			for (int j = 0; j < n; j++)
				for (int i = 0; i < m; i++)
					ncf_emu_store(D, D_.t, (size_t)j * D_.ld + i, cw[(size_t)j * m + i]);
			free(cw);
		},
		NCF_EMU_OP_GEMM);
	return CUBLAS_STATUS_SUCCESS;
}

#endif
