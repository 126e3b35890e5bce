/*
 * module.h - the cuda backend as a shared module, opened when a program
 * asks for a GPU (DESIGN.md section 6; ggml's backend registry): a CPU run
 * never maps the CUDA libraries, and one build serves machines with and
 * without them.  kernels/cuda/cuda.h is the module's side (its table and
 * NCF_CUDA_ABI); this is the loader's.
 *
 * Where the module is looked for, first found wins:
 *  1. already in the program (a program linked with it: the GPU tests);
 *  2. $NCF_CUDA_MODULE, a path;
 *  3. ../lib/ncf/ncf-cuda.so beside the program's directory (build/bin and
 *     PREFIX/bin alike);
 *  4. NCF_MODULE_DIR/ncf-cuda.so, the directory make install puts it in.
 * A module of another ABI (NCF_CUDA_ABI, the sizes of the structs it
 * shares) is refused with both versions named.
 */
#ifndef NCF_MODULE_H
#define NCF_MODULE_H

#include <stddef.h>

#include "cuda/cuda.h"

/* The cuda module's table, opened on first use and kept (later calls
 * return it at once).  NULL when there is none to have, and why in why
 * (len bytes): not found, not loadable (a missing CUDA library, in the
 * dynamic loader's words), or of another ABI. */
const struct ncf_cuda_api *ncf_cuda_load(char *why, size_t len);

/* Does this machine look as if it had an NVIDIA driver (its device files),
 * so that opening the module is worth it?  No library is mapped to answer.
 * 1, or 0 and why. */
int ncf_cuda_driver_present(char *why, size_t len);

/* The path the module was opened from ("linked in" for a program linked
 * with it), or NULL before a successful ncf_cuda_load. */
const char *ncf_cuda_module_path(void);

#endif
