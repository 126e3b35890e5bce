/* backend.c - choosing and opening a backend; see backend.h. */
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "err.h"

int ncf_backend_fallback_level = 2;

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

enum ncf_device ncf_opt_device(const char *arg)
{
	enum ncf_device d;
	if (ncf_device_parse(arg, &d) != 0)
		ncf_usage_error("--device: '%s' is not auto, cpu or cuda",
				ncf_escape(arg, strlen(arg), 40));
	return d;
}

enum ncf_precision ncf_opt_precision(const char *arg)
{
	enum ncf_precision p;
	if (ncf_precision_parse(arg, &p) != 0)
		ncf_usage_error("--precision: '%s' is not fp32, tf32, bf16 or fp16",
				ncf_escape(arg, strlen(arg), 40));
	return p;
}

enum ncf_precision ncf_opt_amp(enum ncf_precision p)
{
	if (p != NCF_PRECISION_DEFAULT && p != NCF_PRECISION_BF16)
		ncf_usage_error("--amp is bf16; it cannot go with --precision %s",
				ncf_precision_name(p));
	return NCF_PRECISION_BF16;
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
