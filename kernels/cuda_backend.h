/*
 * cuda_backend.h - the cuda backend's extras beyond backend.h: the NCCL
 * all-reduce hook, the loss scale, the device's peak rates and the model
 * traffic of a step (for bench/bench_gpu.c), and the debug entry points the
 * tests use to compare single operations with the cpu backend's formulas.
 * Tools use backend.h only.
 *
 * Built twice: by nvcc into libncf.a (the names below), and as plain C++
 * with -DNCF_CUDA_EMULATE into the emulation test, where every name gets an
 * _emu suffix so that both builds can be linked into one program.
 */
#ifndef NCF_CUDA_BACKEND_H
#define NCF_CUDA_BACKEND_H

#ifdef NCF_CUDA_EMULATE
#define ncf_backend_cuda ncf_backend_cuda_emu
#define ncf_cuda_usable ncf_cuda_usable_emu
#define ncf_cuda_describe_versions ncf_cuda_describe_versions_emu
#define ncf_cuda_allreduce ncf_cuda_allreduce_emu
#define ncf_cuda_set_loss_scale ncf_cuda_set_loss_scale_emu
#define ncf_cuda_loss_scale ncf_cuda_loss_scale_emu
#define ncf_cuda_peak_rates ncf_cuda_peak_rates_emu
#define ncf_cuda_step_cost ncf_cuda_step_cost_emu
#define ncf_cuda_eval_cost ncf_cuda_eval_cost_emu
#define ncf_cuda_debug_samples ncf_cuda_debug_samples_emu
#define ncf_cuda_debug_dropout ncf_cuda_debug_dropout_emu
#define ncf_cuda_debug_adam ncf_cuda_debug_adam_emu
#define ncf_cuda_debug_segsum ncf_cuda_debug_segsum_emu
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

/*
 * Sum count floats at dev (device memory) across the ranks of be->dist in
 * place: nothing with one rank; NCCL (bootstrapped through MPI on first use)
 * with several.  Returns 0 or -1 (reported).
 */
int ncf_cuda_allreduce(struct ncf_backend *be, float *dev, size_t count);

/* fp16 dynamic loss scaling: set the scale and the number of good steps
 * after which it doubles (defaults 2^15 and 2000); read the scale. */
void ncf_cuda_set_loss_scale(struct ncf_backend *be, float scale, uint32_t growth_interval);
float ncf_cuda_loss_scale(const struct ncf_backend *be);

/* The device's peak rates, for "fraction of peak" in benchmarks. */
struct ncf_cuda_peak {
	char name[256];
	int cc_major, cc_minor, sms;
	double clock_hz;     /* SM clock (boost), 0 when unknown */
	double mem_bytes_s;  /* memory bandwidth from the memory clock and bus width */
	double matrix_flops; /* dense matrix rate of be's precision, 0 when unknown */
	const char *matrix_source; /* how matrix_flops was found */
};
int ncf_cuda_peak_rates(const struct ncf_backend *be, struct ncf_cuda_peak *pk);

/* The nominal device memory traffic (bytes) and matrix FLOPs of one
 * training step on n samples, and of evaluating `pairs` (user, item) pairs:
 * every kernel's reads and writes counted once, caches ignored. */
void ncf_cuda_step_cost(const struct ncf_backend *be, uint64_t n, double *bytes, double *flops);
void ncf_cuda_eval_cost(const struct ncf_backend *be, uint64_t pairs, double *bytes,
			double *flops);

/* ---- for tests ---------------------------------------------------------- */

/* The samples at epoch positions [first, first + n), generated on the
 * device (after set_train_data).  Returns 0 or -1. */
int ncf_cuda_debug_samples(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   uint32_t *users, uint32_t *items, uint8_t *labels);
/* out (n, H) = dropout(relu(z)) of hidden layer `layer` at positions
 * pos0 + j with be's dropout and seed, computed in fp32 on the device. */
int ncf_cuda_debug_dropout(struct ncf_backend *be, uint32_t epoch, uint64_t pos0, uint32_t layer,
			   size_t n, uint32_t H, const float *z, float *out);
/* One Adam pass on the device over p, m, v (n, updated in place) with
 * gradient g, at Adam step `step` (1-based) of be's hyperparameters. */
int ncf_cuda_debug_adam(struct ncf_backend *be, float *p, float *m, float *v, const float *g,
			size_t n, uint64_t step);
/* out (K, H) = sums of src (n, H) rows by key (n keys < K), through the
 * device sort and segment sums; out rows of absent keys are 0. */
int ncf_cuda_debug_segsum(struct ncf_backend *be, const uint32_t *keys, size_t n, uint32_t K,
			  const float *src, uint32_t H, float *out);

#ifdef __cplusplus
}
#endif

#endif
