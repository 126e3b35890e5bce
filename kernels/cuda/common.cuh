/*
 * common.cuh - what every source of the cuda backend includes: the CUDA
 * runtime, bf16/fp16 and cuBLAS (or, under -DNCF_CUDA_EMULATE with a plain C++
 * compiler, their emulation in emu.h), the launch macro, one error checker
 * per library, and the element types with their conversions and 16-byte
 * vector loads.
 *
 * Errors name themselves.  Every launch goes through NCF_LAUNCH and every
 * cuBLAS (and NCCL) call through its checker; with NCF_CUDA_SYNC=1 in the
 * environment (read when a backend opens) each of them is followed by a
 * synchronisation, so that a kernel that faults is named with its file and
 * line instead of surfacing at the step's one synchronisation.  Without it,
 * a fault that surfaces later says it came from an earlier kernel and how to
 * find it.  A device fault is reported once: later calls that return the
 * same sticky error fail without repeating it.  During a graph capture
 * (capture_begin / capture_end) nothing synchronises and nothing is
 * reported: a capture that fails is an optimisation that did not work, said
 * once at -v by its caller, not an error.
 *
 * Names: everything of the backend lives in namespace NCF_CUDA_NS, which is
 * ncf_cuda for nvcc builds and ncf_cuda_emu for emulation builds, so that
 * both can sit in one link without clashing.
 */
#ifndef NCF_CUDA_COMMON_CUH
#define NCF_CUDA_COMMON_CUH

#ifdef NCF_CUDA_EMULATE
#include "emu.h"
#define NCF_CUDA_NS ncf_cuda_emu
#else
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define NCF_CUDA_NS ncf_cuda
#endif

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "err.h"
}
#include "ncf_hd.h"

/*
 * NCF_LAUNCH(kernel, grid, block, shmem, stream, args...): every launch of
 * the backend goes through this macro.  nvcc: kernel<<<grid, block, shmem,
 * stream>>>(args).  Emulation: the arguments are taken now and the grid runs
 * on the stream (emu.h).  Then launch_done: with NCF_CUDA_SYNC=1 the stream
 * is synchronised and a failure names the kernel.  grid and block are
 * unsigned (1-D) or dim3.  The launcher checks the launch itself after it
 * (CUDA_CHECK(cudaGetLastError())), as before.
 */
#ifdef NCF_CUDA_EMULATE
#define NCF_LAUNCH(kernel, grid, block, shmem, stream, ...)                                   \
	do {                                                                                  \
		ncf_emu_launch((stream), dim3(grid), dim3(block), kernel, __VA_ARGS__);      \
		NCF_CUDA_NS::launch_done(#kernel, __FILE__, __LINE__, (stream));              \
	} while (0)
#else
#define NCF_LAUNCH(kernel, grid, block, shmem, stream, ...)                                   \
	do {                                                                                  \
		kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__);                  \
		NCF_CUDA_NS::launch_done(#kernel, __FILE__, __LINE__, (stream));              \
	} while (0)
#endif
/*
 * NCF_LAUNCH_SYNC: the same for a kernel whose threads cooperate within a
 * block (__shared__ memory, __syncthreads, __syncwarp, ldmatrix and mma.sync),
 * also followed by launch_done.  nvcc: the same launch.  Emulation: the
 * arguments are taken now, as NCF_LAUNCH's, and when the stream gets to
 * it each thread of a block runs as a fiber until its next barrier
 * (emu.h), so the barriers mean what they mean on a GPU; shmem bytes of
 * dynamic shared memory, which the kernel names with NCF_DYN_SHARED(name):
 * an unsigned char * to them, 128-byte aligned.  kernel is a name or a
 * variable (a template kernel of two parameters goes through a variable,
 * whose name is then the one NCF_CUDA_SYNC reports, with file and line).
 */
#ifdef NCF_CUDA_EMULATE
#define NCF_LAUNCH_SYNC(kernel, grid, block, shmem, stream, ...)                              \
	do {                                                                                  \
		ncf_emu_launch_sync((stream), dim3(grid), dim3(block), (shmem), kernel,       \
				    __VA_ARGS__);                                             \
		NCF_CUDA_NS::launch_done(#kernel, __FILE__, __LINE__, (stream));              \
	} while (0)
#define NCF_DYN_SHARED(name) unsigned char *name = ncf_emu_dyn_smem()
#else
#define NCF_LAUNCH_SYNC(kernel, grid, block, shmem, stream, ...)                              \
	do {                                                                                  \
		kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__);                  \
		NCF_CUDA_NS::launch_done(#kernel, __FILE__, __LINE__, (stream));              \
	} while (0)
#define NCF_DYN_SHARED(name)                                          \
	extern __shared__ __align__(128) unsigned char ncf_dyn_smem_[]; \
	unsigned char *name = ncf_dyn_smem_
#endif

/* Host+device helper functions; NCF_DEV: device-only ones (those that use
 * barriers or warp primitives). */
#define NCF_DI __host__ __device__ __forceinline__
#define NCF_DEV __device__ __forceinline__

/* Loop unrolling hint, for the device pass only (the host compiler would
 * warn about an unknown pragma). */
#ifdef __CUDA_ARCH__
#define NCF_UNROLL _Pragma("unroll")
#else
#define NCF_UNROLL
#endif

namespace NCF_CUDA_NS {

/* ---- errors: one macro per library, the call evaluated once ----------- */

/* NCF_CUDA_SYNC=1: synchronise after every launch and library call (set
 * when a backend opens, from the environment). */
inline int g_sync = 0;
/* Inside a graph capture on this thread (capture_begin): no
 * synchronisation, no messages. */
inline thread_local int g_capture = 0;
/* The first failure while quiet, for the caller's one line. */
inline thread_local char g_quiet_msg[256];
/* A sticky device fault already reported: said once. */
inline int g_fault_reported = 0;

/* Start and end a graph capture on this thread (every capture of the
 * backend, so that NCF_CUDA_SYNC does not synchronise inside it and
 * failures stay quiet; the first is kept in g_quiet_msg). */
static inline void capture_begin(void)
{
	if (g_capture++ == 0)
		g_quiet_msg[0] = 0;
}
static inline void capture_end(void)
{
	g_capture--;
}
/* May graphs be used?  Not under NCF_CUDA_SYNC=1 (every launch is
 * synchronised, which a capture forbids). */
static inline int graphs_allowed(void)
{
	return !g_sync;
}

/* A message about a failure: on stderr, or kept while capturing. */
static inline void cuda_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void cuda_report(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (g_capture) {
		if (!g_quiet_msg[0]) { /* the first, cut to fit */
			size_t k = strlen(buf) < sizeof g_quiet_msg ? strlen(buf) : sizeof g_quiet_msg - 1;
			memcpy(g_quiet_msg, buf, k);
			g_quiet_msg[k] = 0;
		}
		return;
	}
	ncf_error("%s", buf);
}

/* Errors that a kernel raises while it runs (sticky: the context is lost). */
static inline int is_fault(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchTimeout:
	case cudaErrorAssert:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorLaunchFailure:
		return 1;
	default:
		return 0;
	}
}

/* Say once that fault e happened, in what (a kernel or call). */
static inline void report_fault(cudaError_t e, const char *what, const char *file, int line)
{
	if (g_fault_reported == (int)e)
		return;
	cuda_report("%s (%s:%d) failed on the device: %s (%s)", what, file, line,
		    cudaGetErrorString(e), cudaGetErrorName(e));
	if (!g_capture)
		g_fault_reported = (int)e;
}

static inline int check_cuda(cudaError_t e, const char *call, const char *file, int line)
{
	if (e == cudaSuccess)
		return 0;
	if (is_fault(e)) {
		if (g_fault_reported == (int)e)
			return -1; /* said already, by the kernel or call that failed */
		cuda_report("%s: %s:%d: %s (%s): a kernel launched before this call failed%s", call,
			    file, line, cudaGetErrorString(e), cudaGetErrorName(e),
			    g_sync ? "" : "; NCF_CUDA_SYNC=1 names it");
		if (!g_capture)
			g_fault_reported = (int)e;
		return -1;
	}
	cuda_report("%s: %s:%d: %s (%s)", call, file, line, cudaGetErrorString(e),
		    cudaGetErrorName(e));
	return -1;
}

/* After a launch (NCF_LAUNCH, or a library's launches on stream s): with
 * NCF_CUDA_SYNC=1, wait for it and name the kernel if it failed (a launch
 * that did not start is left to the launcher's check, which reports it at
 * its own line).  Returns 0, or -1 after reporting. */
static inline int launch_done(const char *kernel, const char *file, int line, cudaStream_t s)
{
	if (!g_sync || g_capture)
		return 0;
	cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
		return 0;
	if (cudaPeekAtLastError() != cudaSuccess)
		return 0;
	cudaError_t e = cudaStreamSynchronize(s);
	if (e == cudaSuccess)
		return 0;
	char what[160];
	snprintf(what, sizeof what, "kernel %s", kernel);
	report_fault(e, what, file, line);
	return -1;
}

/* After a library call that succeeded: with NCF_CUDA_SYNC=1, wait for the
 * device and name the call if its work failed.  Returns 0 or -1. */
static inline int sync_after(const char *call, const char *file, int line)
{
	if (!g_sync || g_capture)
		return 0;
	cudaError_t e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		return 0;
	if (is_fault(e))
		report_fault(e, call, file, line);
	else
		cuda_report("%s: %s:%d: then cudaDeviceSynchronize: %s (%s)", call, file, line,
			    cudaGetErrorString(e), cudaGetErrorName(e));
	return -1;
}

static inline int check_cublas(cublasStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return sync_after(call, file, line);
	cuda_report("%s: %s:%d: cuBLAS: %s (status %d)", call, file, line,
		    cublasGetStatusString(s), (int)s);
	return -1;
}

} /* namespace NCF_CUDA_NS */

/* 0 when call succeeded; else reports "call: file:line: message" and is -1.
 * The call is evaluated once. */
#define CUDA_CHECK(call) NCF_CUDA_NS::check_cuda((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) NCF_CUDA_NS::check_cublas((call), #call, __FILE__, __LINE__)

/*
 * The statement forms, one call per statement (zstd CHECK_F), in functions
 * that return 0 or -1: on failure report (CUDA_TRY, CUBLAS_TRY) and return
 * -1.  NCF_TRY is for the backend's own calls that return 0 or -1 having
 * reported already.
 */
#define CUDA_TRY(call)                    \
	do {                              \
		if (CUDA_CHECK(call) != 0) \
			return -1;        \
	} while (0)
#define CUBLAS_TRY(call)                    \
	do {                                \
		if (CUBLAS_CHECK(call) != 0) \
			return -1;          \
	} while (0)
#define NCF_TRY(call)               \
	do {                        \
		if ((call) != 0)    \
			return -1;  \
	} while (0)

namespace NCF_CUDA_NS {

/* ---- element types ------------------------------------------------------ */

typedef __nv_bfloat16 bf16;
typedef __half f16;

/* Activation element types: fp32 (fp32 and tf32 precisions), bf16, fp16. */
enum act_type { ACT_F32 = 0, ACT_BF16 = 1, ACT_F16 = 2 };

/* f(T()) for act's element type T: the one place an act_type becomes a
 * type, for the callers of templates on T, as
 * by_act(c->act, [&](auto t) { return fn<decltype(t)>(...); }). */
template <typename F> static inline int by_act(int act, F f)
{
	switch (act) {
	case ACT_BF16:
		return f(bf16());
	case ACT_F16:
		return f(f16());
	default:
		return f(float());
	}
}

NCF_DI float to_f32(float x)
{
	return x;
}
NCF_DI float to_f32(bf16 x)
{
	return __bfloat162float(x);
}
NCF_DI float to_f32(f16 x)
{
	return __half2float(x);
}

/* Round a float to T (nearest even). */
template <typename T> NCF_DI T from_f32(float x);
template <> NCF_DI float from_f32<float>(float x)
{
	return x;
}
template <> NCF_DI bf16 from_f32<bf16>(float x)
{
	return __float2bfloat16_rn(x);
}
template <> NCF_DI f16 from_f32<f16>(float x)
{
	return __float2half_rn(x);
}

/* Bits of 16-bit floats. */
NCF_DI uint16_t bits_of(bf16 x)
{
#ifdef NCF_CUDA_EMULATE
	return x.x;
#else
	return __bfloat16_as_ushort(x);
#endif
}
NCF_DI uint16_t bits_of(f16 x)
{
#ifdef NCF_CUDA_EMULATE
	return x.x;
#else
	return __half_as_ushort(x);
#endif
}
template <typename T> NCF_DI T of_bits(uint16_t b);
template <> NCF_DI bf16 of_bits<bf16>(uint16_t b)
{
#ifdef NCF_CUDA_EMULATE
	bf16 x;
	x.x = b;
	return x;
#else
	return __ushort_as_bfloat16(b);
#endif
}
template <> NCF_DI f16 of_bits<f16>(uint16_t b)
{
#ifdef NCF_CUDA_EMULATE
	f16 x;
	x.x = b;
	return x;
#else
	return __ushort_as_half(b);
#endif
}

NCF_DI float u2f(uint32_t u)
{
#if defined(NCF_CUDA_EMULATE) || !defined(__CUDA_ARCH__)
	float f;
	memcpy(&f, &u, 4);
	return f;
#else
	return __uint_as_float(u);
#endif
}
NCF_DI uint32_t f2u(float f)
{
#if defined(NCF_CUDA_EMULATE) || !defined(__CUDA_ARCH__)
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
#else
	return __float_as_uint(f);
#endif
}

/* 16 bytes at p (16-byte aligned) as one load / store. */
NCF_DI uint4 ld16(const void *p)
{
#if defined(NCF_CUDA_EMULATE) || !defined(__CUDA_ARCH__)
	uint4 u;
	memcpy(&u, p, 16);
	return u;
#else
	return *reinterpret_cast<const uint4 *>(p);
#endif
}
NCF_DI void st16(void *p, uint4 u)
{
#if defined(NCF_CUDA_EMULATE) || !defined(__CUDA_ARCH__)
	memcpy(p, &u, 16);
#else
	*reinterpret_cast<uint4 *>(p) = u;
#endif
}

/* x[0..8) = p[0..8) widened to float; p is 16-byte aligned. */
template <typename T> NCF_DI void load8(const T *p, float x[8])
{
	if constexpr (sizeof(T) == 4) {
		uint4 a = ld16(p), b = ld16((const float *)p + 4);
		x[0] = u2f(a.x), x[1] = u2f(a.y), x[2] = u2f(a.z), x[3] = u2f(a.w);
		x[4] = u2f(b.x), x[5] = u2f(b.y), x[6] = u2f(b.z), x[7] = u2f(b.w);
	} else {
		uint4 a = ld16(p);
		uint32_t w[4] = {a.x, a.y, a.z, a.w};
NCF_UNROLL
		for (int k = 0; k < 4; k++) {
			x[2 * k] = to_f32(of_bits<T>((uint16_t)(w[k] & 0xFFFFu)));
			x[2 * k + 1] = to_f32(of_bits<T>((uint16_t)(w[k] >> 16)));
		}
	}
}

/* p[0..8) = x[0..8) rounded to T; p is 16-byte aligned. */
template <typename T> NCF_DI void store8(T *p, const float x[8])
{
	if constexpr (sizeof(T) == 4) {
		uint4 a, b;
		a.x = f2u(x[0]), a.y = f2u(x[1]), a.z = f2u(x[2]), a.w = f2u(x[3]);
		b.x = f2u(x[4]), b.y = f2u(x[5]), b.z = f2u(x[6]), b.w = f2u(x[7]);
		st16(p, a);
		st16((float *)p + 4, b);
	} else {
		uint32_t w[4];
NCF_UNROLL
		for (int k = 0; k < 4; k++)
			w[k] = (uint32_t)bits_of(from_f32<T>(x[2 * k])) |
			       ((uint32_t)bits_of(from_f32<T>(x[2 * k + 1])) << 16);
		uint4 a;
		a.x = w[0], a.y = w[1], a.z = w[2], a.w = w[3];
		st16(p, a);
	}
}

/* The first cnt (<= 8) elements of a row piece: all 8 with one 16-byte
 * access each when vec (aligned and whole), else one by one, the rest of
 * x being 0 on load. */
template <typename T> NCF_DI void load_upto8(const T *p, float x[8], uint32_t cnt, bool vec)
{
	if (vec) {
		load8(p, x);
		return;
	}
NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++)
		x[k] = k < cnt ? to_f32(p[k]) : 0.0f;
}

template <typename T> NCF_DI void store_upto8(T *p, const float x[8], uint32_t cnt, bool vec)
{
	if (vec) {
		store8(p, x);
		return;
	}
NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++)
		if (k < cnt)
			p[k] = from_f32<T>(x[k]);
}

/* ---- cp.async: tiles staged in shared memory without registers --------- */

/*
 * cp_async16(dst, src, bytes): 16 bytes into shared memory at dst, the
 * first `bytes` (0..16) read from global memory at src and the rest zero,
 * without waiting (sm_80's cp.async.cg: through L2, not L1); both 16-byte
 * aligned.  cp_async_commit closes the copies issued since the last commit
 * into a group; cp_async_wait<N>() waits until at most N groups of this
 * thread are still in flight.  The copies are visible to the issuing
 * thread after its wait, to the others after a barrier after that wait.
 * Under emulation the copies wait in the thread's queue until it waits
 * (emu.h), so a read too early shows.
 */
NCF_DEV void cp_async16(void *dst, const void *src, unsigned bytes)
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_cp_async(dst, src, bytes);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	unsigned s = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
		     "r"(bytes));
#elif defined(__CUDA_ARCH__)
	uint4 v = {0, 0, 0, 0};
	if (bytes == 16)
		v = *(const uint4 *)src;
	else
		for (unsigned k = 0; k < bytes; k++)
			((unsigned char *)&v)[k] = ((const unsigned char *)src)[k];
	*(uint4 *)dst = v;
#endif
}
NCF_DEV void cp_async_commit(void)
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_cp_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> NCF_DEV void cp_async_wait(void)
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_cp_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/*
 * Tiles staged in shared memory, in 16-byte pieces (E elements of T) that
 * the threads of a block take in turn: a matrix in global memory (struct
 * gmat), a tile of it in shared memory (struct stile), and this thread's
 * walk over the tile's pieces (struct piece_walk: made once per kernel, so
 * that the loops that stage tiles divide nothing).
 */
template <typename T> struct gmat {
	const T *g;	/* row-major, leading dimension ld */
	size_t ld;
	size_t rmax;	/* rows that exist (others read as 0) */
	uint32_t cmax;	/* columns that exist (others read as 0) */
	int vec;	/* 16-byte aligned with ld a multiple of 16 bytes: cp.async pieces */
};
template <typename T> struct stile {
	T *s;		/* row-major, leading dimension ld */
	unsigned ld;
	unsigned R, C;	/* rows, columns (C a multiple of 16 bytes of T) */
};
/* Piece p = threadIdx.x + i blockDim.x of a tile of `per` pieces a row is
 * (r, c): the first, and the step between a thread's pieces. */
struct piece_walk {
	unsigned r, c, dr, dc, per;
};
NCF_DEV piece_walk walk_of(unsigned per)
{
	piece_walk w = {threadIdx.x / per, threadIdx.x % per, blockDim.x / per, blockDim.x % per,
			per};
	return w;
}
/* The next piece of walk w's thread. */
NCF_DEV void walk_next(const piece_walk &w, unsigned &r, unsigned &c)
{
	r += w.dr;
	c += w.dc;
	if (c >= w.per) {
		c -= w.per;
		r++;
	}
}

/*
 * A tile staged without waiting: t.s[r t.ld + c] = m.g[(r0 + r) m.ld + c0 +
 * c] (0 past m.rmax, m.cmax) for r < t.R, c < t.C, by cp.async in 16-byte
 * pieces where m.vec (c0 a multiple of 16 bytes), else with plain loads
 * and stores; w = walk_of(t.C / E).  The caller commits the group and
 * waits for it (cp_async_wait), then a barrier, before any thread reads
 * the tile; plain stores are visible after that barrier too.
 */
template <typename T>
NCF_DEV void stage_tile(const stile<T> &t, const gmat<T> &m, size_t r0, uint32_t c0,
			const piece_walk &w)
{
	const unsigned E = 16 / sizeof(T);
	unsigned r = w.r, c = w.c;
	for (; r < t.R; walk_next(w, r, c)) {
		size_t gr = r0 + r;
		uint32_t gc = c0 + c * E;
		T *dst = t.s + (size_t)r * t.ld + c * E;
		const T *src = m.g + gr * m.ld + gc;
		if (m.vec) {
			unsigned n = gr < m.rmax && gc < m.cmax ? (m.cmax - gc < E ? m.cmax - gc : E) : 0;
			cp_async16(dst, n ? (const void *)src : (const void *)m.g,
				   n * (unsigned)sizeof(T));
			continue;
		}
		for (unsigned e = 0; e < E; e++)
			dst[e] = gr < m.rmax && gc + e < m.cmax ? src[e] : from_f32<T>(0.0f);
	}
}

/*
 * t.s[r t.ld + c] = m.g[ids[r] m.ld + c] for r < t.R, c < m.cmax (0 from
 * m.cmax to t.C): stage_tile's work for gathered rows (m.rmax unused),
 * committed and waited for by the caller; w = walk_of(t.C / E).
 */
template <typename V>
NCF_DEV void stage_rows(const stile<V> &t, const gmat<V> &m, const uint32_t *ids,
			const piece_walk &w)
{
	const unsigned E = 16 / sizeof(V);
	unsigned r = w.r, c = w.c;
	for (; r < t.R; walk_next(w, r, c)) {
		unsigned cc = c * E;
		V *dst = t.s + (size_t)r * t.ld + cc;
		const V *src = m.g + (size_t)ids[r] * m.ld + cc;
		if (m.vec) {
			unsigned n = cc < m.cmax ? (m.cmax - cc < E ? m.cmax - cc : E) : 0;
			cp_async16(dst, n ? (const void *)src : (const void *)m.g,
				   n * (unsigned)sizeof(V));
			continue;
		}
		for (unsigned e = 0; e < E; e++)
			dst[e] = cc + e < m.cmax ? src[e] : from_f32<V>(0.0f);
	}
}

/* cuBLAS type of T. */
template <typename T> inline cudaDataType dtype_of(void);
template <> inline cudaDataType dtype_of<float>(void)
{
	return CUDA_R_32F;
}
template <> inline cudaDataType dtype_of<bf16>(void)
{
	return CUDA_R_16BF;
}
template <> inline cudaDataType dtype_of<f16>(void)
{
	return CUDA_R_16F;
}

/* The device the launchers size persistent grids and shared memory for:
 * its SMs, shared memory per SM and the most a block may have (set when a
 * backend opens its device, and for a dry cost run to the cost model's
 * machine, cost.cuh; until then an H200's). */
inline int g_sms = 132;
inline size_t g_smem_sm = 233472, g_smem_block = 232448;

/* Threads per block of every 1-D launch. */
enum { BLOCK = 256 };

/*
 * Blocks for `threads` threads in 1-D blocks of BLOCK.  Returns 0 and the
 * count in *blocks (0: nothing to launch), or -1 (reported) when the grid
 * would exceed CUDA's 2^31 - 1 blocks.
 */
static inline int grid_1d(size_t threads, unsigned *blocks)
{
	size_t b = (threads + BLOCK - 1) / BLOCK;
	if (b > 0x7FFFFFFFu) {
		ncf_error("cuda backend: %zu threads are more than one launch takes", threads);
		return -1;
	}
	*blocks = (unsigned)b;
	return 0;
}

/* Global index of this thread in a 1-D launch. */
#define NCF_TID ((size_t)blockIdx.x * blockDim.x + threadIdx.x)

/* ReLU that keeps a NaN (x > 0 ? x : 0 would turn it into 0, and an fp16
 * overflow upstream, inf - inf, would slip past the step's inf/NaN check).
 * The same value as x > 0 ? x : 0 for every other x.  Every kernel that
 * applies a ReLU in the forward pass uses this one. */
NCF_DI float relu(float x)
{
	return x > 0.0f ? x : (x != x ? x : 0.0f);
}

} /* namespace NCF_CUDA_NS */

#endif
