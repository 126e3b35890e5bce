/*
 * graphs.cuh - CUDA graphs of the cuda backend: the launches of a function
 * captured once and replayed.  graphs.cu knows nothing of what it
 * captures: the step driver (backend.cu) hands it the step's function,
 * scoring (score.cu) a chunk's.  See graphs.cu for when graphs are used.
 */
#ifndef NCF_CUDA_GRAPHS_CUH
#define NCF_CUDA_GRAPHS_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* Work to capture: issues launches on c->s (no allocation, synchronisation
 * or kernel attribute inside); returns 0 or -1. */
typedef int (*graph_work)(void *arg);

/* Before any GEMM: a cuBLAS workspace of our own (cuBLAS must not allocate
 * while a graph is being captured); graphs off under NCF_CUDA_SYNC=1, the
 * step's graph off under NCF_CUDA_GRAPH=0.  Returns 0 or -1. */
int graphs_init(struct cu *c);
void graphs_free(struct cu *c);

/* May a training step run as a graph (graphs on, no capture of it failed)? */
int graphs_step_on(const struct cu *c);
/* fn(arg) as the training step's graph: captured anew each step, swapped
 * into the instantiated graph (cudaGraphExecUpdate) and launched.  Returns
 * 0 (launched), 1 when the caller should issue fn itself (the first step,
 * which runs uncaptured; or the capture failed: said once, the step's
 * graph off from then on), -1 on an error. */
int graphs_step(struct cu *c, graph_work fn, void *arg);
/* Count a training step the caller issued launch by launch. */
void graphs_step_plain(struct cu *c);

/* fn(arg) as a graph kept under key (len <= GRAPH_KEY bytes: what the
 * launches bake in), captured on first use for the current row buffers
 * (c->rows_gen), replayed after.  Returns 0, 1 when the caller should issue
 * fn itself (graphs off, or the capture failed: said once, naming what),
 * -1. */
enum { GRAPH_KEY = 64 };
int graphs_cached(struct cu *c, const void *key, size_t len, graph_work fn, void *arg,
		  const char *what);

/* Counts for the tests and the tools' reports (ncf_cuda_graph_counts):
 * cached graphs captured and launched, step graphs captured, instantiated
 * and launched, steps issued launch by launch. */
struct graph_counts {
	uint64_t captures, launches, step_captures, step_instantiations, step_launches, step_plain;
};
struct graph_counts graphs_counts(const struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
