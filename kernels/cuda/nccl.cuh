/*
 * nccl.cuh - the gradient's all-reduce across the ranks of a job (DESIGN.md
 * section 7): nothing with one rank; with several, NCCL, its communicator
 * made when the backend opens.  See nccl.cu.
 */
#ifndef NCF_CUDA_NCCL_CUH
#define NCF_CUDA_NCCL_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* The communicator of a job of several ranks (be->dist->mpi, size > 1):
 * NCCL, bootstrapped through MPI; nothing otherwise.  A build without NCCL
 * refuses several ranks.  Returns 0 or -1 (reported). */
int nccl_open(struct ncf_backend *be, struct cu *c);
/* Sum count floats at dev (device) across the ranks of be->dist in place,
 * on c->s: nothing with one rank, NCCL with several.  Returns 0 or -1
 * (reported). */
int allreduce(struct ncf_backend *be, float *dev, size_t count);
void nccl_free(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
