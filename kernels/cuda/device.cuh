/*
 * device.cuh - the device of a cuda backend (struct cu's device.cu part):
 * which GPU, its precision and element type, a stream and cuBLAS on it.
 * device.cu also says whether a GPU is usable and which CUDA software this
 * is (cuda.h).
 */
#ifndef NCF_CUDA_DEVICE_CUH
#define NCF_CUDA_DEVICE_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* The device of this rank (its local rank on the node), be->precision
 * resolved for it, c's element type, a stream and cuBLAS on it.  Returns
 * 0, -1 or -3 (a precision the device lacks, or more ranks on the node
 * than GPUs). */
int device_open(struct ncf_backend *be, struct cu *c);
/* c's element type and GEMM compute type for be->precision (resolved;
 * ampere: compute capability 8.0 or newer). */
void device_set_precision(struct ncf_backend *be, struct cu *c, int ampere);
void device_close(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
