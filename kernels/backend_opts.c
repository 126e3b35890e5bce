/* backend_opts.c - see backend_opts.h. */
#include <string.h>

#include "backend_opts.h"
#include "cli.h"
#include "err.h"

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

int ncf_backend_opt_parse(int c, const char *arg, struct ncf_backend_opts *o)
{
	int64_t threads;
	switch (c) {
	case NCF_OPT_DEVICE:
		if (ncf_device_parse(arg, &o->device) == 0)
			return 1;
		ncf_error("--device: '%s' is not auto, cpu or cuda", ncf_escape(arg, strlen(arg), 40));
		return -1;
	case NCF_OPT_PRECISION:
		if (ncf_precision_parse(arg, &o->precision) == 0)
			return 1;
		ncf_error("--precision: '%s' is not fp32, tf32, bf16 or fp16",
			  ncf_escape(arg, strlen(arg), 40));
		return -1;
	case NCF_OPT_AMP:
		o->amp = 1;
		return 1;
	case NCF_OPT_THREADS:
		NCF_TRY(ncf_opt_parse_int("--threads", arg, 1, 4096, &threads));
		o->threads = (int)threads;
		return 1;
	default:
		return 0;
	}
}

int ncf_backend_opts_check(struct ncf_backend_opts *o)
{
	if (!o->amp)
		return 0;
	if (o->precision != NCF_PRECISION_DEFAULT && o->precision != NCF_PRECISION_BF16) {
		ncf_error("--amp is bf16; it cannot go with --precision %s",
			  ncf_precision_name(o->precision));
		return -1;
	}
	o->precision = NCF_PRECISION_BF16;
	return 0;
}
