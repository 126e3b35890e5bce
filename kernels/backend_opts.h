/*
 * backend_opts.h - --device, --precision, --amp and --threads: the options
 * of every tool that runs a backend (ncf-train, ncf-eval, ncf-infer),
 * parsed into what ncf_backend_open takes.  Bad values are reported naming
 * the option and returned as -1; the tools end the command line
 * (cli/usage.h: ncf_backend_option and ncf_backend_opts_finish).
 *
 * Put NCF_BACKEND_LONGOPTS in the getopt_long table, hand each option to
 * ncf_backend_opt_parse, then call ncf_backend_opts_check and pass the
 * fields to ncf_backend_open.
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

/* Option c (getopt's value) with its argument into o: 1 when it was one of
 * these, 0 when it was not, -1 for a bad value (reported). */
int ncf_backend_opt_parse(int c, const char *arg, struct ncf_backend_opts *o);
/* --amp is bf16, unless another precision was asked for (reported: -1).
 * Returns 0 or -1. */
int ncf_backend_opts_check(struct ncf_backend_opts *o);

/* "auto", "cpu", "cuda" (or "gpu"); "fp32", "tf32", "bf16", "fp16".
 * Return 0, or -1 for another word. */
int ncf_device_parse(const char *s, enum ncf_device *d);
int ncf_precision_parse(const char *s, enum ncf_precision *p);

#endif
