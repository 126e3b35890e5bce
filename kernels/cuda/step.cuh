/*
 * step.cuh - a training step of the cuda backend: its arguments, the
 * code paths that run it, and what the paths share (step.cu).  A path is
 * one function that issues the step's launches in order, on c->s, without
 * waiting for the device (forward, loss, backward, reductions, the
 * all-reduce and Adam), so that a reader sees a whole step in one screen
 * and graphs.cu can capture it as one CUDA graph; and a prepare function
 * that allocates its buffers first (nothing allocates, synchronises or
 * sets a kernel attribute inside a capture).
 *
 *   step_fused.cu    the default (NCF_CUDA_PATH=fused): fused dense layers,
 *                    head and reductions, rows sorted by user;
 *   step_unfused.cu  NCF_CUDA_PATH=unfused: cuBLAS for every product and a
 *                    kernel per elementwise pass, for comparison.
 *
 * Both compute the gradient of the mean loss over the global batch (times
 * the fp16 loss scale), as reference.c does, then the update.
 */
#ifndef NCF_CUDA_STEP_CUH
#define NCF_CUDA_STEP_CUH

#include "params.cuh"

namespace NCF_CUDA_NS {

enum { PATH_FUSED = 0, PATH_UNFUSED = 1, PATHS = 2 };
/* *path for a name: "fused", "unfused", NULL or "" (the default, fused).
 * Returns 0, or -1 (reported) for another name. */
int path_parse(const char *name, int *path);

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

/* st for the step of positions [first, first + n) of epoch, after checking
 * them against the epoch and making room for the slice's rows.  Returns 0
 * or -1 (reported). */
int step_init(struct step *st, struct ncf_backend *be, uint32_t epoch, uint64_t first,
	      uint64_t n, int update, double *loss_acc);

struct step_path {
	const char *name;
	int graph;	/* may run as one CUDA graph (graphs.cu) */
	int keeps_loss; /* run adds the loss to st->loss_acc itself (else that is NULL) */
	/* its buffers for st (before any launch, never inside a capture) */
	int (*prepare)(const struct step *st);
	/* the step's launches in order; the loss sum into c->loss_dev */
	int (*run)(const struct step *st);
	/* (optional) free what prepare allocated */
	void (*close)(struct cu *c);
};
extern const struct step_path step_fused, step_unfused;
/* The path c->path names, or the unfused one for a shape the fused
 * kernels do not take (said once at -v). */
const struct step_path *step_path_of(struct ncf_backend *be, struct cu *c);

/* ---- what the paths share (step.cu) ------------------------------------ */

/* A rank without rows: a zero gradient and loss, then the update (the
 * other ranks' gradients still arrive through the all-reduce); copy as
 * step_adam's. */
int step_idle(const struct step *st, int copy);
/* The first layer's and the MLP tables' gradients from dAU and dAI:
 * dW1 = [dAU^T mlp_user, dAI^T mlp_item], dmlp_user = dAU W1u,
 * dmlp_item = dAI W1i, over whole tables (an absent id has a zero row, so
 * its gradient is exactly 0). */
int step_tables_backward(const struct step *st);
/* Adam on the summed gradient (skipped on the device when fp16 found an
 * inf or NaN); copy: also write the 16-bit copy, which the next step's
 * products read. */
int step_adam(const struct step *st, int copy);

} /* namespace NCF_CUDA_NS */

#endif
