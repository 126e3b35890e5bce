/* backend.c - choosing and opening a backend; see backend.h. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "err.h"
#include "ncf_hd.h"

int ncf_backend_fallback_level = 2;

uint64_t ncf_epoch_check(const char *who, int64_t positives, uint32_t negatives,
			 uint64_t first, uint64_t n)
{
	uint64_t S = (uint64_t)positives * (1 + (uint64_t)negatives);
	if (S == 0 || first > S || n > S - first) {
		ncf_error("%s backend: positions %llu..%llu are past the epoch's %llu samples", who,
			  (unsigned long long)first, (unsigned long long)(first + n),
			  (unsigned long long)S);
		return 0;
	}
	return S;
}

void ncf_adam_constants(const struct ncf_hparams *hp, uint64_t step, struct ncf_adam_k *k)
{
	k->lr = hp->lr;
	k->beta1 = hp->beta1;
	k->beta2 = hp->beta2;
	k->eps = hp->eps;
	k->bc1 = (float)(1.0 - pow((double)hp->beta1, (double)step));
	k->bc2 = (float)(1.0 - pow((double)hp->beta2, (double)step));
}

int ncf_device_parse(const char *s, enum ncf_device *d)
{
	if (!strcmp(s, "auto"))
		*d = NCF_DEVICE_AUTO;
	else if (!strcmp(s, "cpu"))
		*d = NCF_DEVICE_CPU;
	else if (!strcmp(s, "cuda") || !strcmp(s, "gpu"))
		*d = NCF_DEVICE_CUDA;
	else
		return -1;
	return 0;
}

int ncf_precision_parse(const char *s, enum ncf_precision *p)
{
	if (!strcmp(s, "fp32"))
		*p = NCF_PRECISION_FP32;
	else if (!strcmp(s, "tf32"))
		*p = NCF_PRECISION_TF32;
	else if (!strcmp(s, "bf16"))
		*p = NCF_PRECISION_BF16;
	else if (!strcmp(s, "fp16"))
		*p = NCF_PRECISION_FP16;
	else
		return -1;
	return 0;
}

int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o)
{
	switch (c) {
	case NCF_OPT_DEVICE:
		if (ncf_device_parse(arg, &o->device) != 0)
			ncf_usage_error("--device: '%s' is not auto, cpu or cuda",
					ncf_escape(arg, strlen(arg), 40));
		return 1;
	case NCF_OPT_PRECISION:
		if (ncf_precision_parse(arg, &o->precision) != 0)
			ncf_usage_error("--precision: '%s' is not fp32, tf32, bf16 or fp16",
					ncf_escape(arg, strlen(arg), 40));
		return 1;
	case NCF_OPT_AMP:
		o->amp = 1;
		return 1;
	case NCF_OPT_THREADS:
		o->threads = (int)ncf_opt_int("--threads", arg, 1, 4096);
		return 1;
	default:
		return 0;
	}
}

void ncf_backend_opts_finish(struct ncf_backend_opts *o)
{
	if (!o->amp)
		return;
	if (o->precision != NCF_PRECISION_DEFAULT && o->precision != NCF_PRECISION_BF16)
		ncf_usage_error("--amp is bf16; it cannot go with --precision %s",
				ncf_precision_name(o->precision));
	o->precision = NCF_PRECISION_BF16;
}

const char *ncf_precision_name(enum ncf_precision p)
{
	switch (p) {
	case NCF_PRECISION_FP32:
		return "fp32";
	case NCF_PRECISION_TF32:
		return "tf32";
	case NCF_PRECISION_BF16:
		return "bf16";
	case NCF_PRECISION_FP16:
		return "fp16";
	default:
		return "default";
	}
}

int ncf_backend_open(struct ncf_backend *be, enum ncf_device device, const struct ncf_shape *s,
		     const struct ncf_hparams *hp, enum ncf_precision precision, int threads,
		     struct ncf_dist *dist)
{
	memset(be, 0, sizeof *be);
	be->shape = *s;
	ncf_layout_make(s, &be->layout);
	be->hp = *hp;
	be->dist = dist;
	be->threads = threads;
	be->precision = precision;
	const struct ncf_backend_i *impl = &ncf_backend_cpu;
	if (device == NCF_DEVICE_CUDA || device == NCF_DEVICE_AUTO) {
#ifdef NCF_HAVE_CUDA
		char why[256];
		if (ncf_cuda_usable(why, sizeof why)) {
			impl = &ncf_backend_cuda;
		} else if (device == NCF_DEVICE_CUDA) {
			ncf_error("--device cuda: no usable GPU: %s", why);
			return -3;
		} else {
			if (ncf_verbosity >= ncf_backend_fallback_level)
				ncf_info("no usable GPU (%s); using the CPU", why);
		}
#else
		if (device == NCF_DEVICE_CUDA) {
			ncf_error("--device cuda: this build has no CUDA support (rebuild where nvcc "
				  "and cuBLAS are installed)");
			return -3;
		}
#endif
	}
	if (impl == &ncf_backend_cpu && precision != NCF_PRECISION_DEFAULT &&
	    precision != NCF_PRECISION_FP32) {
		if (device == NCF_DEVICE_CPU) {
			ncf_error("--precision %s needs a GPU; the cpu backend computes in fp32",
				  ncf_precision_name(precision));
			return -3;
		}
		ncf_warn("--precision %s is for GPUs; the CPU computes in fp32",
			 ncf_precision_name(precision));
	}
	be->i = impl;
	int rc = impl->init(be);
	if (rc != 0) {
		if (impl->free)
			impl->free(be);
		return rc == -3 ? -3 : -1;
	}
	return 0;
}

void ncf_backend_close(struct ncf_backend *be)
{
	if (be->i && be->i->free)
		be->i->free(be);
	be->i = NULL;
}
