/*
 * backend_opts.h - --device, --precision, --amp and --threads: the options
 * of every tool that runs a backend (ncf-train, ncf-eval, ncf-infer), parsed
 * up here with the tools so that kernels/ never parses, prints usage or
 * exits.
 *
 * Put NCF_BACKEND_LONGOPTS in the getopt_long table, hand each option to
 * ncf_backend_option (1: it was one of these; a bad value exits 2 naming
 * the option), then call ncf_backend_opts_finish and pass the fields to
 * ncf_backend_open.
 */
#ifndef NCF_BACKEND_OPTS_H
#define NCF_BACKEND_OPTS_H

#include "backend.h"

enum { NCF_OPT_DEVICE = 0x4000, NCF_OPT_PRECISION, NCF_OPT_AMP, NCF_OPT_THREADS };
#define NCF_BACKEND_LONGOPTS                                                 \
	{"device", required_argument, 0, NCF_OPT_DEVICE},                    \
	{"precision", required_argument, 0, NCF_OPT_PRECISION},              \
	{"amp", no_argument, 0, NCF_OPT_AMP},                                \
	{"threads", required_argument, 0, NCF_OPT_THREADS}

struct ncf_backend_opts {
	enum ncf_device device;	      /* default auto */
	enum ncf_precision precision; /* default: the device's */
	int amp;		      /* --amp given */
	int threads;		      /* 0: OMP_NUM_THREADS or all cores */
};

int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o);
/* --amp is bf16, unless another precision was asked for (exit 2). */
void ncf_backend_opts_finish(struct ncf_backend_opts *o);

/* "auto", "cpu", "cuda" (or "gpu"); "fp32", "tf32", "bf16", "fp16".
 * Return 0, or -1 for another word. */
int ncf_device_parse(const char *s, enum ncf_device *d);
int ncf_precision_parse(const char *s, enum ncf_precision *p);

#endif
