/*
 * gpu_cost.h - the GPU cost model of bench/bench_gpu.c (its only user):
 * the device's peak rates, and the nominal device memory traffic and matrix
 * FLOPs of the cuda backend's training step and evaluation, so that the
 * benchmark can say what fraction of the GPU a step uses.  A model, not a
 * measurement.  The training step's count is the backend's own
 * (ncf_cuda_step_cost: its step code run dry, every launch noting what it
 * moves), so it follows the code; the evaluation's is a formula kept in
 * step with the scoring path by hand.
 *
 * Legend: n rows of a step (or pairs scored), U users, I items, F GMF
 * factors, M the MLP embedding width, H1..HL the hidden widths, es bytes
 * per activation element (2 in bf16 and fp16, else 4).
 */
#ifndef NCF_BENCH_GPU_COST_H
#define NCF_BENCH_GPU_COST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "module.h"

/* The device's peak rates, for "fraction of peak": the cost model's
 * machine (struct ncf_cuda_machine, kernels/cuda/cost.cu). */
struct ncf_cuda_peak {
	char name[256];
	int cc_major, cc_minor, sms;
	double clock_hz;	   /* SM clock (the device's maximum) */
	double mem_bytes_s;	   /* memory bandwidth: a device-to-device copy's, measured */
	double mem_datasheet;	   /* memory clock x bus width x 2 */
	char mem_source[160];	   /* how mem_bytes_s was found */
	double matrix_flops;	   /* the datasheet's dense matrix rate of be's precision */
	const char *matrix_source; /* how matrix_flops was found */
};

/* The peaks of an open cuda backend's device.  Returns 0 or -1. */
static int gpu_peak_rates(const struct ncf_backend *be, struct ncf_cuda_peak *pk)
{
	struct ncf_cuda_machine m;
	memset(pk, 0, sizeof *pk);
	const struct ncf_cuda_api *api = ncf_cuda_load(NULL, 0);
	if (!api || api->machine(&m) != 0)
		return -1;
	snprintf(pk->name, sizeof pk->name, "%s", m.name);
	pk->cc_major = m.cc_major;
	pk->cc_minor = m.cc_minor;
	pk->sms = m.sms;
	pk->clock_hz = m.clock_hz;
	pk->mem_bytes_s = m.bandwidth;
	pk->mem_datasheet = m.bandwidth_datasheet;
	snprintf(pk->mem_source, sizeof pk->mem_source, "%s", m.bandwidth_source);
	pk->matrix_flops = be->precision == NCF_PRECISION_BF16 || be->precision == NCF_PRECISION_FP16
				   ? m.peak_bf16
			   : be->precision == NCF_PRECISION_TF32 ? m.peak_tf32
								 : m.peak_fp32;
	pk->matrix_source = "datasheet FLOP/SM/clock x SMs x clock (kernels/cuda/cost.cu)";
	return 0;
}

/* Bytes per activation element of an open cuda backend's precision. */
static double gpu_act_bytes(const struct ncf_backend *be)
{
	return be->precision == NCF_PRECISION_BF16 || be->precision == NCF_PRECISION_FP16 ? 2 : 4;
}

/* Bytes and matrix FLOPs of one training step of be (its shape, batch,
 * precision, and the dense layers NCF_CUDA_DENSE pins, else the fixed
 * order; the times that choose on a GPU are not the model's) on a data set of
 * `positives` training positives: the backend's own count
 * (ncf_cuda_step_cost, kernels/cuda/cost.cuh).  Returns 0 or -1. */
static int gpu_step_cost(const struct ncf_backend *be, int64_t positives, double *bytes,
			 double *flops)
{
	struct ncf_cuda_cost *c = (struct ncf_cuda_cost *)calloc(1, sizeof *c);
	const struct ncf_cuda_api *api = ncf_cuda_load(NULL, 0);
	int rc = c && api ? api->step_cost(&be->shape, &be->hp, be->precision,
					   getenv("NCF_CUDA_DENSE"), positives, c)
			  : -1;
	*bytes = rc == 0 ? c->bytes : 0;
	*flops = rc == 0 ? c->flops : 0;
	free(c);
	return rc;
}

/* Bytes and matrix FLOPs of scoring `pairs` (user, item) pairs. */
static void gpu_eval_cost(const struct ncf_backend *be, uint64_t pairs, double *bytes,
			  double *flops)
{
	const struct ncf_shape *s = &be->shape;
	double es = gpu_act_bytes(be), n = (double)pairs, F = s->factors, H1 = s->layers[1];
	double HL = ncf_shape_last(s), b = n * (8 + 8 + 3 * H1 * es), f = 0;
	for (uint32_t k = 2; k < s->n_layers; k++) {
		double in = s->layers[k - 1], out = s->layers[k];
		b += n * (in + out) * es + 2 * n * out * es;
		f += 2 * n * in * out;
	}
	b += n * (2 * F * 4 + HL * es + 4) + n * 5;
	*bytes = b;
	*flops = f;
}

#endif
