/*
 * test_hooks.h - single operations of the cuda backend run on their own,
 * for the tests that compare them with the shared formulas and the
 * reference (tests/unit/test_cuda_emu.cc under emulation, tests/gpu on a
 * GPU).  test_hooks.cu is compiled into those tests only, never into
 * libncf.a or a tool.  Names get an _emu suffix under NCF_CUDA_EMULATE, as
 * in cuda.h.
 */
#ifndef NCF_CUDA_TEST_HOOKS_H
#define NCF_CUDA_TEST_HOOKS_H

#ifdef NCF_CUDA_EMULATE
#define ncf_cuda_debug_samples ncf_cuda_debug_samples_emu
#define ncf_cuda_debug_dropout ncf_cuda_debug_dropout_emu
#define ncf_cuda_debug_adam ncf_cuda_debug_adam_emu
#define ncf_cuda_debug_graphs ncf_cuda_debug_graphs_emu
#define ncf_cuda_debug_step_graph ncf_cuda_debug_step_graph_emu
#define ncf_cuda_debug_fault ncf_cuda_debug_fault_emu
#define ncf_cuda_debug_step_cost ncf_cuda_debug_step_cost_emu
#define ncf_cuda_debug_emu_counts ncf_cuda_debug_emu_counts_emu
#define ncf_cuda_debug_dense ncf_cuda_debug_dense_emu
#define ncf_cuda_debug_linear ncf_cuda_debug_linear_emu
#define ncf_cuda_debug_linear_w ncf_cuda_debug_linear_w_emu
#endif

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The samples at epoch positions [first, first + n), generated on the
 * device (after set_train_data): users, items (n), labels (n).  Returns 0
 * or -1. */
int ncf_cuda_debug_samples(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   uint32_t *users, uint32_t *items, uint8_t *labels);
/* out (n, H) = dropout(relu(z)) of hidden layer `layer` at positions
 * pos0 + j with be's dropout and seed, computed in fp32 on the device;
 * z (n, H).  Returns 0 or -1. */
int ncf_cuda_debug_dropout(struct ncf_backend *be, uint32_t epoch, uint64_t pos0, uint32_t layer,
			   size_t n, uint32_t H, const float *z, float *out);
/* One Adam pass on the device over p, m, v (n, updated in place) with
 * gradient g, at Adam step `step` (1-based) of be's hyperparameters.
 * Returns 0 or -1. */
int ncf_cuda_debug_adam(struct ncf_backend *be, float *p, float *m, float *v, const float *g,
			size_t n, uint64_t step);
/* The scoring graphs be has captured and launched so far (graphs.cu). */
void ncf_cuda_debug_graphs(const struct ncf_backend *be, uint64_t *captured, uint64_t *launched);
/* The training step's graph (graphs.cu, graph_step) so far: steps captured,
 * instantiations (the first, and each time cudaGraphExecUpdate refused the
 * new capture), graph launches. */
void ncf_cuda_debug_step_graph(const struct ncf_backend *be, uint64_t *captured,
			       uint64_t *instantiated, uint64_t *launched);
/* A kernel that faults (fault_kernel: __trap) on be's stream, then a copy
 * and a synchronisation, as a step would do.  Returns -1 with the fault
 * reported: with NCF_CUDA_SYNC=1 naming fault_kernel, else at the
 * synchronisation.  The device is unusable afterwards (on a GPU: for the
 * rest of the process). */
int ncf_cuda_debug_fault(struct ncf_backend *be);

#ifdef NCF_CUDA_EMULATE
/* Emulation only (emu.h): lazy streams (1) or eager (0); cublasGemmEx
 * refusing to be captured; the number of devices; forget device faults. */
void ncf_cuda_emu_lazy(int on);
void ncf_cuda_emu_blas_no_capture(int on);
void ncf_cuda_emu_devices(int n);
void ncf_cuda_emu_reset_faults(void);
#endif

/*
 * A fused dense layer (mlp.cu) on host data, with be's dropout and seed:
 * mode 0 fp32 (exact), 1 tf32, 2 bf16, 3 fp16 (inputs rounded to it on the
 * host, results widened back).  Forward: A (rows, in), W (out, in), bh the
 * bias (out), dropout of hidden layer `layer` at positions pos0 + r of
 * epoch.  Backward: A = dZ (rows, out), W (out, in), bh = H (rows, in).
 */
struct ncf_cuda_layer_case {
	int mode;
	uint32_t epoch, layer;
	uint64_t pos0;
	size_t rows;
	uint32_t in, out;
	const float *A, *W, *bh;
};
/* Forward (backward 0): res (rows, out) = dropout(relu(A W^T + bh)).
 * Backward: res (rows, in) = bh > 0 ? (A W) * scale : 0; part
 * (ceil(rows / 128), in) the column sums of res per 128 rows.  Returns 0
 * or -1. */
int ncf_cuda_debug_linear(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
			  int backward, float *res, float *part);
/* The backward with the weight gradient (linear_bwdw_cuda, then
 * reduce_partials_cuda): dX (rows, in) = H > 0 ? (dZ W) * scale : 0, db
 * (in) its column sums, dW (out, in) = dZ^T H.  Returns 0 or -1. */
int ncf_cuda_debug_linear_w(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
			    float *dX, float *db, float *dW);
/* One ncf_backend_train_step with the cost recorder on (cost.cuh, live:
 * the work runs and is recorded): out gets what it noted.  Returns the
 * step's result. */
int ncf_cuda_debug_step_cost(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			     double *loss_sum, struct ncf_cuda_cost *out);
/* names[k]: the implementation dense layer k (2..L) took ("fused", "lt",
 * "plain"; dense.cuh), NULL where none (no layer, no step yet). */
void ncf_cuda_debug_dense(const struct ncf_backend *be, const char **names);
/* Under emulation: what emu.h has counted so far (kernel launches, GEMMs,
 * memsets, copies) into c[0..4); returns 0.  Elsewhere: -1. */
int ncf_cuda_debug_emu_counts(unsigned long c[4]);

#ifdef __cplusplus
}
#endif

#endif
