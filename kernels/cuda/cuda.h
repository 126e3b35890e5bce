/*
 * cuda.h - the cuda backend seen from outside kernels/cuda/.  The backend
 * is a shared module (ncf-cuda.so) that kernels/module.c opens when a tool
 * asks for a GPU, so that a CPU run never maps the CUDA libraries and one
 * build serves machines with and without them (ggml's backend registry).
 * Its one entry point, ncf_cuda_module(), returns the table below: the
 * backend's table for backend.c, whether a GPU is usable, version lines
 * for -vV, and the few extras that tests and benchmarks need (fp16 loss
 * scale, the device's facts, the cost model of a step).  The loader
 * refuses a module whose NCF_CUDA_ABI or struct sizes differ from its own.
 * Tools use backend.h only.  Test-only entry points: test_hooks.h.
 *
 * The module's code calls the library under it (common/: errors, the
 * model's layout, the formulas) in the program that loaded it: the
 * programs export those symbols (the Makefile links them so).
 *
 * Built twice: by nvcc into the module (the names below), and as plain C++
 * with -DNCF_CUDA_EMULATE into the emulation test and the emulated module
 * ncf-cuda-emu.so, where every name gets an _emu suffix so that both builds
 * can be linked into one program.
 */
#ifndef NCF_CUDA_H
#define NCF_CUDA_H

#ifdef NCF_CUDA_EMULATE
#define ncf_backend_cuda ncf_backend_cuda_emu
#define ncf_cuda_usable ncf_cuda_usable_emu
#define ncf_cuda_describe_versions ncf_cuda_describe_versions_emu
#define ncf_cuda_set_loss_scale ncf_cuda_set_loss_scale_emu
#define ncf_cuda_loss_scale ncf_cuda_loss_scale_emu
#define ncf_cuda_device_info ncf_cuda_device_info_emu
#define ncf_cuda_step_cost ncf_cuda_step_cost_emu
#define ncf_cuda_module ncf_cuda_module_emu
#define ncf_cuda_cost_model ncf_cuda_cost_model_emu
#define ncf_cuda_machine_of ncf_cuda_machine_of_emu
#define ncf_cuda_copy_bandwidth ncf_cuda_copy_bandwidth_emu
#define ncf_cuda_graph_counts ncf_cuda_graph_counts_emu
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend_impl.h"

extern const struct ncf_backend_i ncf_backend_cuda;

/* 1 when a CUDA device can be used; else 0 and why, in the CUDA runtime's
 * words, in why (len bytes). */
int ncf_cuda_usable(char *why, size_t len);

/* key<TAB>value lines: CUDA runtime, driver, cuBLAS, cuBLASLt, NCCL, GPUs
 * (or "no usable GPU: reason"). */
void ncf_cuda_describe_versions(FILE *out);

/* fp16 dynamic loss scaling: set the scale and the number of good steps
 * after which it doubles (defaults 2^15 and 2000); read the scale. */
void ncf_cuda_set_loss_scale(struct ncf_backend *be, float scale, uint32_t growth_interval);
float ncf_cuda_loss_scale(const struct ncf_backend *be);

/* What the device of an open cuda backend says about itself (0 where it
 * does not say). */
struct ncf_cuda_device {
	char name[256];
	int cc_major, cc_minor; /* compute capability */
	int sms;		/* streaming multiprocessors */
	int clock_khz;		/* SM clock (boost) */
	int mem_clock_khz;	/* memory clock */
	int bus_bits;		/* memory bus width */
};
/* Fill d for be's device.  Returns 0 or -1 (reported). */
int ncf_cuda_device_info(const struct ncf_backend *be, struct ncf_cuda_device *d);

/*
 * The cost model of one training step (bench/bench_gpu --cost): what each
 * launch of the step moves (bytes read + written in device memory, caches
 * ignored but for gathers over rows sorted by their key, see
 * kernels/cuda/cost.cuh) and computes (matrix FLOPs), in launch order, as
 * the backend's own step code says it while it runs dry (nothing launched,
 * no device needed).
 */
#define NCF_CUDA_COST_ITEMS 512
#define NCF_CUDA_MACHINES 2 /* the named machines of the prediction: H200, H100 */
struct ncf_cuda_cost_item {
	const char *name;  /* the op: a kernel's launcher, a GEMM, a memset, ... */
	const char *kind;  /* "kernel", "gemm", "memset", "copy", "sort" (iota and CUB) */
	double bytes, flops;
	double predicted_s; /* the model's time of the launch on its machine (this GPU, or
			     * the reference without one: struct ncf_cuda_machine) */
	const char *bound;  /* what binds it: "bytes", "flops", "latency", "chain", "issue",
			     * "launch" */
	double machine_s[NCF_CUDA_MACHINES]; /* the same on each named machine, from its
					      * reference figures (kernels/cuda/cost.cu) */
	const char *machine_bound[NCF_CUDA_MACHINES];
	double issue_s[NCF_CUDA_MACHINES]; /* its instruction-issue term there (0: none) */
};
struct ncf_cuda_cost {
	double bytes, flops;	/* of the whole step */
	double predicted_s;	/* the model's time of the step: the launches' times summed */
	const char *machine[NCF_CUDA_MACHINES];	/* the named machines: "H200", "H100" */
	double machine_s[NCF_CUDA_MACHINES];	/* the step's time on each */
	unsigned launches;	/* kernels + gemms + memsets + sorts: every launch on the stream */
	unsigned kernels, gemms, memsets, copies, sorts;
	unsigned n, dropped;	/* items kept; past NCF_CUDA_COST_ITEMS */
	struct ncf_cuda_cost_item item[NCF_CUDA_COST_ITEMS];
	/* dense[k]: the implementation hidden layer k (2..L) took ("fused",
	 * "lt", "plain"), NULL elsewhere */
	const char *dense[NCF_MAX_LAYERS];
};
/*
 * The cost of one step of hp->batch rows (one rank) of shape s, hp and
 * precision, with the dense layers' implementations `dense` (as
 * NCF_CUDA_DENSE: "fused", "lt", "plain" or one per layer; NULL: the
 * fixed order a step takes without timing, kernels/cuda/dense.cuh) for a
 * data set of `positives` training positives.  Returns 0 or -1 (reported:
 * a bad name, a batch the epoch cannot hold).
 */
int ncf_cuda_step_cost(const struct ncf_shape *s, const struct ncf_hparams *hp,
		       enum ncf_precision precision, const char *dense, int64_t positives,
		       struct ncf_cuda_cost *out);
/* The cost model's machine and assumptions as key<TAB>value lines. */
void ncf_cuda_cost_model(FILE *out);

/*
 * The machine the cost model predicts for (kernels/cuda/cost.cu), every
 * figure it uses.  With a GPU (the device this process uses): its name,
 * SMs, L2, shared memory and clocks from cudaGetDeviceProperties, its
 * bandwidth from NCF_CUDA_BANDWIDTH (GB/s, what scripts/gpu-check.sh
 * measures at its start) or else a device-to-device copy timed once, and
 * the matrix rates from the datasheet's FLOP per SM per clock times its SMs
 * and clock.  Without one (a dry run on a machine with no GPU, the CPU
 * emulation): the reference machine, an H200 as measured here, said so in
 * source.  The latency, launch gap and PCIe figures are assumptions either
 * way (cost.cu argues them).
 */
struct ncf_cuda_machine {
	char name[256];		   /* the GPU's name, or the reference's */
	char source[160];	   /* where the figures come from */
	int cc_major, cc_minor, sms;
	double l2_bytes, smem_sm_bytes, smem_block_bytes;
	double clock_hz;	   /* SM clock (the device's maximum) */
	double bandwidth;	   /* bytes/s of device memory (read + written) the model uses */
	double bandwidth_datasheet; /* memory clock x bus width x 2 (0: unknown) */
	char bandwidth_source[160];
	/* the datasheet's dense peaks in FLOP/s: tensor cores in bf16/fp16 and
	 * TF32, fp32 FMA without them (0: an architecture the table lacks) */
	double peak_bf16, peak_tf32, peak_fp32;
	double gemm_share;	   /* of the peak that cuBLAS's large products reach */
	double wmma_share;	   /* of cuBLAS's rate that our mma.sync tiles reach */
	double latency_s, launch_gap_s, pcie_bytes_s, pcie_latency_s; /* assumed */
};
/* The cost model's machine (figures found once per process).  Returns 0,
 * or -1 (reported) when the device's properties cannot be read. */
int ncf_cuda_machine_of(struct ncf_cuda_machine *m);
/* Time device-to-device copies of a buffer of `bytes` on the device this
 * process uses: *bytes_s gets the bytes read and written per second (the
 * best of a few).  Returns 0 or -1 (reported). */
int ncf_cuda_copy_bandwidth(size_t bytes, double *bytes_s);

/* How an open cuda backend issued its training steps: as the replay of a
 * captured CUDA graph, or launch by launch (the first step always, before
 * the first capture; every step where the graph is off or its capture
 * failed, the paths without one, NCF_CUDA_PROFILE). */
struct ncf_cuda_graphs {
	uint64_t captures;	 /* step captures */
	uint64_t instantiations; /* of which instantiated anew (the rest updated in place) */
	uint64_t replays;	 /* steps run as their graph */
	uint64_t plain;		 /* steps run launch by launch */
	int failed;		 /* a capture failed: the graph is off from then on */
};
void ncf_cuda_graph_counts(const struct ncf_backend *be, struct ncf_cuda_graphs *out);

/*
 * The module's table.  NCF_CUDA_ABI changes whenever this struct, struct
 * ncf_backend_i, struct ncf_backend or anything they point at changes
 * meaning; backend_size and table_size catch a forgotten bump.
 */
#define NCF_CUDA_ABI 6
struct ncf_cuda_api {
	uint32_t abi;	       /* NCF_CUDA_ABI of the module's build */
	uint32_t backend_size; /* sizeof(struct ncf_backend) */
	uint32_t table_size;   /* sizeof(struct ncf_backend_i) */
	const char *version;   /* ncf's version string */
	const char *kind;      /* "cuda", or "cuda emulated on the CPU" */
	const struct ncf_backend_i *backend;
	int (*usable)(char *why, size_t len);
	void (*describe_versions)(FILE *out);
	void (*set_loss_scale)(struct ncf_backend *be, float scale, uint32_t growth_interval);
	float (*loss_scale)(const struct ncf_backend *be);
	int (*device_info)(const struct ncf_backend *be, struct ncf_cuda_device *d);
	int (*step_cost)(const struct ncf_shape *s, const struct ncf_hparams *hp,
			 enum ncf_precision precision, const char *dense, int64_t positives,
			 struct ncf_cuda_cost *out);
	void (*cost_model)(FILE *out);
	int (*machine)(struct ncf_cuda_machine *m);
	int (*copy_bandwidth)(size_t bytes, double *bytes_s);
	void (*graph_counts)(const struct ncf_backend *be, struct ncf_cuda_graphs *out);
};
/* The module's entry point (the symbol kernels/module.c looks up). */
const struct ncf_cuda_api *ncf_cuda_module(void);

#ifdef __cplusplus
}
#endif

#endif
