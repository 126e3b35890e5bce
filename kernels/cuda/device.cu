/*
 * device.cu - what the cuda backend says about the machine (see cuda.h):
 * whether a GPU is usable, the versions of the CUDA software for -vV, and
 * the facts of an open backend's device that benchmarks turn into peak
 * rates (bench/gpu_cost.h).
 */
#include "backend.cuh"

#ifndef NCF_CUDA_EMULATE
#include <cublasLt.h>
#ifdef NCF_HAVE_NCCL
#include <nccl.h>
#endif
#endif

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
