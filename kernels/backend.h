/*
 * backend.h - the one interface through which the tools train and score
 * NeuMF (DESIGN.md section 6).  Two implementations: "cpu" (kernels/cpu/:
 * the fast backend, checked against the plain reference in
 * kernels/cpu/reference.c) and "cuda" (kernels/cuda/).  Tools call the
 * ncf_backend_* functions below and nothing else: never an implementation's
 * table (backend_impl.h), never CUDA.
 *
 * A backend holds the parameters and the Adam state, the training data
 * (to generate the sample stream itself) and the evaluation candidates.
 * Nothing here parses options, prints usage or exits: failures are
 * reported (err.h) and returned as -1 (or -3, "unavailable", from open).
 *
 * Legend: B batch, U users, I items, F GMF factors, P training positives,
 * N evaluation negatives per user, E explicit training negatives.
 */
#ifndef NCF_BACKEND_H
#define NCF_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dist.h"
#include "model.h"

/* What the sample stream is made of (host arrays, borrowed; ncf_hd.h's
 * ncf_sample_at says how). */
struct ncf_train_data {
	uint32_t users, items;	    /* U, I */
	int64_t positives;	    /* P */
	const int64_t *offsets;	    /* (U+1) CSR rows */
	const uint32_t *items_csr;  /* (P) sorted within rows */
	const uint32_t *entry_user; /* (P) row of each entry */
	uint64_t train_negatives;   /* E explicit negatives, 0 if none */
	const int64_t *neg_offsets; /* (U+1) their CSR rows; NULL when E = 0 */
	const uint32_t *neg_items;  /* (E) in the order given; NULL when E = 0 */
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

struct ncf_backend_i; /* the implementation's table: backend_impl.h */

struct ncf_backend {
	const struct ncf_backend_i *i; /* the implementation (private) */
	struct ncf_shape shape;
	struct ncf_layout layout;
	struct ncf_hparams hp;
	struct ncf_dist *dist;	       /* never NULL; (0, 1) without MPI */
	int threads;		       /* CPU threads to use */
	enum ncf_precision precision;  /* once open, what it computes in (never the default) */
	uint64_t step;		       /* Adam steps taken */
	double loss_kept;	       /* losses of steps given no loss_sum (backend.c) */
	void *impl;		       /* the implementation's state */
	struct ncf_resident *resident; /* kept pairs where the implementation keeps none (backend.c) */
};

/*
 * Pick and initialise a backend for device (auto: CUDA when usable, else
 * the CPU, saying so at -v) for shape s
 * and hyperparameters hp; threads 0: OMP_NUM_THREADS or all cores.
 * Returns 0; -1 after reporting a failure; -3 when the device or the
 * precision was asked for and is not available (the tools exit 3).
 */
int ncf_backend_open(struct ncf_backend *be, enum ncf_device device, const struct ncf_shape *s,
		     const struct ncf_hparams *hp, enum ncf_precision precision, int threads,
		     struct ncf_dist *dist);
/* Release everything (a closed or never opened backend: nothing). */
void ncf_backend_close(struct ncf_backend *be);

/* The implementation's name ("cpu", "cuda"), for logs. */
const char *ncf_backend_name(const struct ncf_backend *be);
/* Does be keep the steps' losses where it computes (a GPU's stay on the
 * device), so that ncf_backend_train_step given no loss_sum need not wait
 * for the step?  1 or 0; without, a step with no loss_sum costs the same
 * as one with it. */
int ncf_backend_keeps_loss(const struct ncf_backend *be);
/* Does ncf_backend_host_alloc give page-locked memory (a GPU's), which
 * get_state and set_state copy at the bus's speed?  1 or 0: plain
 * memory, no faster than the caller's own. */
int ncf_backend_pins_host(const struct ncf_backend *be);
/* Does be compute in host memory on this machine's cores (the cpu
 * backend)?  1: host memory is its device, what ncf_backend_resident_set
 * keeps is a host copy (a benchmark's two measurements are the same
 * work), and the CPU's own rates are its roofline; 0: a device of its own. */
int ncf_backend_on_host(const struct ncf_backend *be);

/* Load parameters (layout.total floats) and Adam moments (m, v may be NULL:
 * zero); be->step is the step count.  Returns 0 or -1. */
int ncf_backend_set_state(struct ncf_backend *be, const float *params, const float *m,
			  const float *v);
/* Read parameters and moments back (any may be NULL).  Returns 0 or -1. */
int ncf_backend_get_state(struct ncf_backend *be, float *params, float *m, float *v);
/* Give the training data for the sample stream, and the evaluation
 * candidates (borrowed until close).  Return 0 or -1. */
int ncf_backend_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d);
int ncf_backend_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d);

/*
 * One optimizer step on positions [first, first + n) of epoch's stream
 * (the global batch; this rank takes its slice, gradients are averaged
 * over the n samples of all ranks).  *loss_sum gets this rank's sum of
 * per-sample losses; loss_sum NULL: the backend keeps it, added to what
 * ncf_backend_take_loss returns next (a GPU then need not wait for the step
 * to end).  Returns 0 or -1.
 */
int ncf_backend_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   double *loss_sum);
/* *loss_sum = this rank's loss sum over the steps given no loss_sum since
 * the last call (0 if none), waiting for them to end.  Returns 0 or -1. */
int ncf_backend_take_loss(struct ncf_backend *be, double *loss_sum);
/* bytes of host memory that get_state and set_state copy fastest to and
 * from (page-locked on a GPU, so that a copy runs at the bus's speed and
 * needs no staging), or plain malloc'd memory where the backend has no
 * such kind or cannot give it now.  Never NULL (out of memory ends the
 * process, as ncf_xmalloc).  Free with ncf_backend_host_free on the same
 * open backend. */
void *ncf_backend_host_alloc(struct ncf_backend *be, size_t bytes);
void ncf_backend_host_free(struct ncf_backend *be, void *p);
/* The gradient of the mean loss over positions [first, first + n) of
 * epoch (this rank's slice) into grad (layout.total floats), no update, no
 * all-reduce; for tests.  Returns 0, or -1 (reported; also when the
 * implementation has none). */
int ncf_backend_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		     float *grad, double *loss_sum);
/* Ranks of users [u0, u1) among their candidates (metrics.h), no dropout,
 * into ranks (u1 - u0).  Returns 0 or -1. */
int ncf_backend_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks);
/* Probabilities of n (user, item) pairs, no dropout.  Returns 0 or -1. */
int ncf_backend_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out);
/* Logits of n pairs (what score takes the sigmoid of).  Returns 0, or -1
 * (reported; also when the implementation has none). */
int ncf_backend_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		       size_t n, float *out);
/*
 * Pairs kept where the backend computes, for benchmarks that measure as
 * NVIDIA's inference.py does (inputs already on the device, a
 * synchronisation around each pass).  ncf_backend_resident_set copies n
 * pairs there once (device memory on a GPU, a host copy on the CPU),
 * replacing those kept before; an id outside the model is refused.
 * ncf_backend_score_resident computes the probabilities of the first n kept
 * pairs and returns when they are done, leaving them where they were
 * computed; when out (n) is not NULL they are also copied there (for checks,
 * not part of the pass).  Return 0 or -1.
 */
int ncf_backend_resident_set(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
			     size_t n);
int ncf_backend_score_resident(struct ncf_backend *be, size_t n, float *out);
/* Wait for queued work (timing); 0 at once where nothing is queued.
 * Returns 0 or -1. */
int ncf_backend_sync(struct ncf_backend *be);
/* key<TAB>value lines about the device for -vV and logs (none for some). */
void ncf_backend_describe(struct ncf_backend *be, FILE *out);
/* key<TAB>value lines about the GPU software (kernels/module.h): the cuda
 * module's path, then the CUDA runtime, driver, cuBLAS, NCCL and GPUs it
 * sees; or "cuda\t" and why there is no module to ask.  Opens the module. */
void ncf_backend_describe_versions(FILE *out);

#endif
