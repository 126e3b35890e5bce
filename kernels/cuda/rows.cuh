/*
 * rows.cuh - the per-row buffers of the cuda backend (struct cu's rows.cu
 * part): room for the rows of a training step or a scoring launch.
 * Allocated before any work is issued, never
 * while a graph is being captured; moving them makes graphs on them stale
 * (c->rows_gen).
 */
#ifndef NCF_CUDA_ROWS_CUH
#define NCF_CUDA_ROWS_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* Room for n rows in every per-row buffer.  Returns 0 or -1. */
int rows_ensure(struct ncf_backend *be, struct cu *c, size_t n);
void rows_free(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
