/*
 * device.cu - the device of a cuda backend (device.cuh), and what the
 * backend says about the machine (cuda.h): whether a GPU is usable, the
 * versions of the CUDA software for -vV, and the facts of an open
 * backend's device that benchmarks turn into peak rates (bench/gpu_cost.h).
 */
#include <unistd.h>

#include "device.cuh"

#ifndef NCF_CUDA_EMULATE
#include <cublasLt.h>
#ifdef NCF_HAVE_NCCL
#include <nccl.h>
#endif
#endif

namespace NCF_CUDA_NS {

int device_open(struct ncf_backend *be, struct cu *c)
{
	int count = 0;
	CUDA_TRY(cudaGetDeviceCount(&count));
	if (count < 1) {
		ncf_error("cuda backend: no CUDA device");
		return -1;
	}
	struct ncf_dist *d = be->dist;
	if (d->mpi && d->local_size > count) { /* (ranks in one process share: tests) */
		char host[256] = "this host";
		if (gethostname(host, sizeof host) != 0)
			snprintf(host, sizeof host, "this host");
		host[sizeof host - 1] = 0;
		ncf_error("cuda backend: %d ranks on %s and %d GPU%s there: start at most one rank "
			  "per GPU (mpirun -npernode %d, or more nodes)",
			  d->local_size, host, count, count == 1 ? "" : "s", count);
		return -3; /* two ranks on one GPU: not available */
	}
	c->dev = (d->local_rank > 0 ? d->local_rank : 0) % count; /* the local rank, checked above */
	CUDA_TRY(cudaSetDevice(c->dev));
	CUDA_TRY(cudaGetDeviceProperties(&c->prop, c->dev));
	g_sms = c->prop.multiProcessorCount > 0 ? c->prop.multiProcessorCount : 1;
	g_smem_sm = c->prop.sharedMemPerMultiprocessor;
	g_smem_block = c->prop.sharedMemPerBlockOptin;
	int ampere = c->prop.major >= 8; /* TF32 and bf16 tensor cores */
	enum ncf_precision p = be->precision;
	if (p == NCF_PRECISION_DEFAULT)
		p = ampere ? NCF_PRECISION_TF32 : NCF_PRECISION_FP32;
	if ((p == NCF_PRECISION_TF32 || p == NCF_PRECISION_BF16) && !ampere) {
		ncf_error("--precision %s needs a GPU of compute capability 8.0 or newer; %s is %d.%d",
			  ncf_precision_name(p), c->prop.name, c->prop.major, c->prop.minor);
		return -3; /* a feature the device lacks: exit 3 */
	}
	be->precision = p;
	device_set_precision(be, c, ampere);
	CUDA_TRY(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
	c->have_stream = 1;
	CUBLAS_TRY(cublasCreate(&c->blas.h));
	c->have_blas = 1;
	CUBLAS_TRY(cublasSetStream(c->blas.h, c->s));
	CUBLAS_TRY(cublasSetMathMode(c->blas.h, p == NCF_PRECISION_FP32 ? CUBLAS_DEFAULT_MATH
								   : CUBLAS_TF32_TENSOR_OP_MATH));
	return 0;
}

void device_set_precision(struct ncf_backend *be, struct cu *c, int ampere)
{
	enum ncf_precision p = be->precision;
	c->act = p == NCF_PRECISION_BF16 ? ACT_BF16 : p == NCF_PRECISION_FP16 ? ACT_F16 : ACT_F32;
	c->es = c->act == ACT_F32 ? 4 : 2;
	c->blas.compute_f32 = p == NCF_PRECISION_FP32 || !ampere ? CUBLAS_COMPUTE_32F
								  : CUBLAS_COMPUTE_32F_FAST_TF32;
}

void device_close(struct cu *c)
{
	if (c->have_stream)
		cudaStreamSynchronize(c->s);
	if (c->have_blas)
		cublasDestroy(c->blas.h);
	if (c->have_stream)
		cudaStreamDestroy(c->s);
	c->have_blas = c->have_stream = 0;
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

int ncf_cuda_usable(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(why, len, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return 0;
	}
	if (n < 1) {
		snprintf(why, len, "no CUDA device found");
		return 0;
	}
	cudaDeviceProp p;
	e = cudaGetDeviceProperties(&p, 0);
	if (e != cudaSuccess) {
		snprintf(why, len, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return 0;
	}
	if (p.major < 8) {
		snprintf(why, len,
			 "%s has compute capability %d.%d; this build has code for 8.0 and newer",
			 p.name, p.major, p.minor);
		return 0;
	}
	return 1;
}

void ncf_cuda_describe_versions(FILE *out)
{
#ifdef NCF_CUDA_EMULATE
	fprintf(out, "cuda\tCPU emulation (NCF_CUDA_EMULATE)\n");
	/* its one device, so that what asks for a GPU runs on it (tests/lib.sh) */
	fprintf(out, "gpu\t0: CPU emulation (NCF_CUDA_EMULATE), compute capability 9.0\n");
#else
	int rt = 0, drv = 0;
	if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
		fprintf(out, "cuda runtime\t%d.%d\n", rt / 1000, rt % 1000 / 10);
	if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
		fprintf(out, "cuda driver\t%d.%d\n", drv / 1000, drv % 1000 / 10);
	else
		fprintf(out, "cuda driver\tnone\n");
	int maj = 0, min = 0, pat = 0;
	if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
		fprintf(out, "cublas\t%d.%d.%d\n", maj, min, pat);
	size_t lt = cublasLtGetVersion();
	fprintf(out, "cublaslt\t%zu.%zu.%zu\n", lt / 10000, lt / 100 % 100, lt % 100);
#ifdef NCF_HAVE_NCCL
	int nv = 0;
	if (ncclGetVersion(&nv) == ncclSuccess)
		fprintf(out, "nccl\t%d.%d.%d\n", nv / 10000, nv % 10000 / 100, nv % 100);
#endif
	char why[256];
	if (!ncf_cuda_usable(why, sizeof why)) {
		fprintf(out, "gpu\tno usable GPU: %s\n", why);
		return;
	}
	int count = 0;
	cudaGetDeviceCount(&count);
	for (int d = 0; d < count; d++) {
		cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
			continue;
		fprintf(out, "gpu\t%d: %s, compute capability %d.%d, %.1f GiB, %d SMs\n", d, p.name,
			p.major, p.minor, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
			p.multiProcessorCount);
	}
#endif
}

int ncf_cuda_device_info(const struct ncf_backend *be, struct ncf_cuda_device *d)
{
	const struct cu *c = impl(be);
	memset(d, 0, sizeof *d);
	snprintf(d->name, sizeof d->name, "%s", c->prop.name);
	d->cc_major = c->prop.major;
	d->cc_minor = c->prop.minor;
	d->sms = c->prop.multiProcessorCount;
	CUDA_TRY(cudaDeviceGetAttribute(&d->clock_khz, cudaDevAttrClockRate, c->dev));
	CUDA_TRY(cudaDeviceGetAttribute(&d->mem_clock_khz, cudaDevAttrMemoryClockRate, c->dev));
	CUDA_TRY(cudaDeviceGetAttribute(&d->bus_bits, cudaDevAttrGlobalMemoryBusWidth, c->dev));
	return 0;
}
