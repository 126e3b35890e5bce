/*
 * backend.h - the one interface through which the tools train and score
 * NeuMF (DESIGN.md section 6).  Two implementations: "cpu" (cpu.c, the
 * readable specification and the oracle of the GPU tests) and "cuda"
 * (cuda_backend.cu).  Tools never call CUDA themselves.
 *
 * A backend holds the parameters and the Adam state, the training data
 * (to generate the sample stream itself) and the evaluation candidates.
 * Legend: U users, I items, P training positives, N evaluation negatives
 * per user, B batch.
 */
#ifndef NCF_BACKEND_H
#define NCF_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dist.h"
#include "model.h"

/* What the sample stream is made of (host arrays, borrowed). */
struct ncf_train_data {
	uint32_t users, items;	    /* U, I */
	int64_t positives;	    /* P */
	const int64_t *offsets;	    /* (U+1) CSR rows */
	const uint32_t *items_csr;  /* (P) sorted within rows */
	const uint32_t *entry_user; /* (P) row of each entry */
};

/* The evaluation candidates (host arrays, borrowed). */
struct ncf_eval_data {
	uint32_t users, negatives; /* U, N */
	const uint32_t *test_items;/* (U) */
	const uint32_t *neg;	   /* (U, N) */
	const uint8_t *counted;	   /* (U, N) 1 = counted (metrics.h) */
};

enum ncf_device {
	NCF_DEVICE_AUTO = 0, /* a GPU when one is usable, else the CPU */
	NCF_DEVICE_CPU = 1,
	NCF_DEVICE_CUDA = 2,
};

enum ncf_precision {
	NCF_PRECISION_DEFAULT = 0, /* tf32 on GPUs that have it, fp32 on the CPU */
	NCF_PRECISION_FP32 = 1,
	NCF_PRECISION_TF32 = 2,
	NCF_PRECISION_BF16 = 3,
	NCF_PRECISION_FP16 = 4,
};

struct ncf_backend_i;

struct ncf_backend {
	const struct ncf_backend_i *i; /* the implementation */
	struct ncf_shape shape;
	struct ncf_layout layout;
	struct ncf_hparams hp;
	struct ncf_dist *dist;	       /* never NULL; (0, 1) without MPI */
	int threads;		       /* CPU threads to use */
	enum ncf_precision precision;
	uint64_t step;		       /* Adam steps taken */
	void *impl;		       /* the implementation's state */
};

struct ncf_backend_i {
	const char *name;
	/* Allocate for be->shape, be->hp.  Returns 0, -1 (reported), or -3 when
	 * the device lacks a requested feature (reported; the tools exit 3). */
	int (*init)(struct ncf_backend *be);
	/* Release everything init and later calls allocated. */
	void (*free)(struct ncf_backend *be);
	/* Load parameters (layout.total floats) and Adam moments (may be NULL:
	 * zero); be->step is the step count.  Returns 0 or -1. */
	int (*set_state)(struct ncf_backend *be, const float *params, const float *m,
			 const float *v);
	/* Read parameters and moments back (m, v may be NULL).  Returns 0 or -1. */
	int (*get_state)(struct ncf_backend *be, float *params, float *m, float *v);
	/* Give the training data for the sample stream.  Returns 0 or -1. */
	int (*set_train_data)(struct ncf_backend *be, const struct ncf_train_data *d);
	/* Give the evaluation candidates.  Returns 0 or -1. */
	int (*set_eval_data)(struct ncf_backend *be, const struct ncf_eval_data *d);
	/*
	 * One optimizer step on positions [first, first + n) of epoch's stream
	 * (the global batch; this rank takes its slice, gradients are averaged
	 * over the n samples of all ranks).  *loss_sum gets this rank's sum of
	 * per-sample losses.  Returns 0 or -1.
	 */
	int (*train_step)(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			  double *loss_sum);
	/* (optional) The gradient of the mean loss over positions [first,
	 * first + n) of epoch into grad (layout.total floats), no update, no
	 * all-reduce; for tests.  Returns 0 or -1. */
	int (*grad)(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		    float *grad, double *loss_sum);
	/* Ranks of users [u0, u1) among their candidates (metrics.h), no
	 * dropout.  Returns 0 or -1. */
	int (*eval_ranks)(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks);
	/* Probabilities of n (user, item) pairs, no dropout.  Returns 0 or -1. */
	int (*score)(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		     size_t n, float *out);
	/* (optional) Logits of n pairs (what score takes the sigmoid of). */
	int (*logits)(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out);
	/* (optional) Wait for queued work (timing).  */
	int (*sync)(struct ncf_backend *be);
	/* (optional) Lines about the device for -vV and logs. */
	void (*describe)(struct ncf_backend *be, FILE *out);
};

extern const struct ncf_backend_i ncf_backend_cpu;
#ifdef NCF_HAVE_CUDA
extern const struct ncf_backend_i ncf_backend_cuda;
/* 1 when a CUDA device can be used; else 0 and why in buf. */
int ncf_cuda_usable(char *why, size_t len);
/* Versions of the CUDA runtime, driver, cuBLAS and the GPU, for -vV. */
void ncf_cuda_describe_versions(FILE *out);
#endif

/*
 * Pick and initialise a backend for device (auto: CUDA when usable, else
 * the CPU, saying so at verbosity 2).  Returns 0; -1 after reporting a
 * failure; -3 when the device was asked for and is not available (exit 3).
 */
/* The display level at which --device auto reports falling back to the CPU:
 * 2 (normal, the default: ncf-train) or 3 (-v: tools used in pipelines). */
extern int ncf_backend_fallback_level;

int ncf_backend_open(struct ncf_backend *be, enum ncf_device device, const struct ncf_shape *s,
		     const struct ncf_hparams *hp, enum ncf_precision precision, int threads,
		     struct ncf_dist *dist);
void ncf_backend_close(struct ncf_backend *be);

/*
 * --device, --precision, --amp and --threads: the options of every tool
 * that runs a backend.  Put NCF_BACKEND_LONGOPTS in the getopt_long table,
 * hand each option to ncf_backend_option (1: it was one of these; a bad
 * value exits 2 naming the option), then call ncf_backend_opts_finish.
 */
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

/* Names for options and messages. */
int ncf_device_parse(const char *s, enum ncf_device *d);
int ncf_precision_parse(const char *s, enum ncf_precision *p);
const char *ncf_precision_name(enum ncf_precision p);

/*
 * The samples of an epoch, S = positives * (1 + negatives), after checking
 * that positions [first, first + n) lie inside it (the permutation is
 * defined on [0, S) only).  Returns S, or 0 after reporting (who names the
 * backend).
 */
uint64_t ncf_epoch_check(const char *who, int64_t positives, uint32_t negatives,
			 uint64_t first, uint64_t n);

/* Adam constants for the step-th update (1-based). */
struct ncf_adam_k;
void ncf_adam_constants(const struct ncf_hparams *hp, uint64_t step, struct ncf_adam_k *k);

#endif
