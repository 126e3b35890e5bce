/*
 * step.cuh - a training step of the cuda backend (step.cu): its arguments
 * and the one function that issues its launches in order, on c->s,
 * without waiting for the device (forward, loss, backward, reductions, the
 * all-reduce and Adam), so that a reader sees a whole step in one screen
 * and graphs.cu can capture it as one CUDA graph.  The hidden dense layers
 * are one call each way (dense.cuh), whose implementation each layer took
 * on the first step; step_prepare allocates what the step needs first
 * (nothing allocates, synchronises or sets a kernel attribute inside a
 * capture).
 *
 * The step computes the gradient of the mean loss over the global batch
 * (times the fp16 loss scale), as reference.c does, then the update.
 */
#ifndef NCF_CUDA_STEP_CUH
#define NCF_CUDA_STEP_CUH

#include "dense.cuh"
#include "params.cuh"

namespace NCF_CUDA_NS {

/* One training step: the global batch at epoch positions [first, first + n)
 * and this rank's slice of it, B rows from position pos0. */
struct step {
	struct ncf_backend *be;
	struct cu *c;
	uint32_t epoch;
	uint64_t first, n; /* the global batch */
	uint64_t pos0;	   /* this rank's first position */
	size_t B;	   /* this rank's rows (0: none, the rank still takes part) */
	uint64_t S;	   /* the epoch's samples */
	dropout_k dk;
	ncf_adam_k adam;   /* the constants of Adam's step be->step + 1 */
	int update;	   /* 1: the all-reduce and Adam; 0: the gradient only (tests) */
	double *loss_acc;  /* the loss sum is also added to *loss_acc (device), or NULL */
};

/* The step's buffers beyond the rows (rows.cu), for cap rows: the rows
 * sorted by user and where each user's and item's rows start, the
 * partial sums of the head and the dense layers' backward, the per-block
 * losses. */
struct step_buffers {
	size_t cap;
	uint32_t *row_item;	/* (cap) the item of each row, rows sorted by user */
	uint8_t *row_label;	/* (cap) the label of each row */
	uint32_t *user_first;	/* (U + 1) the first row of each user */
	uint32_t *item_first;	/* (I + 1) the first position of each item in the item order */
	float *part;		/* partial sums of the head and the backward */
	double *loss;		/* (ceil(cap / HEAD_ROWS)) per-block loss sums */
};

/* st for the step of positions [first, first + n) of epoch, after checking
 * them against the epoch and making room for the slice's rows.  Returns 0
 * or -1 (reported). */
int step_init(struct step *st, struct ncf_backend *be, uint32_t epoch, uint64_t first,
	      uint64_t n, int update, double *loss_acc);
/* The step's buffers for st (before any launch, never inside a capture),
 * the dense layers' too.  Returns 0 or -1. */
int step_prepare(const struct step *st);
/* The step's launches in order; the loss sum into c->loss_dev (also added
 * to st->loss_acc).  Returns 0 or -1. */
int step_run(const struct step *st);
/* Free what step_prepare allocated. */
void step_close(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
