/*
 * emu_module.cc - the entry point of the emulated cuda module
 * (ncf-cuda-emu.so, see the Makefile): under NCF_CUDA_EMULATE the module's
 * names carry an _emu suffix (cuda.h), so that the emulation test can link
 * them beside a real build; the loader (kernels/module.c) looks for the
 * plain name, which this file gives the emulated table.
 */
#include "cuda.h"

#undef ncf_cuda_module
extern "C" const struct ncf_cuda_api *ncf_cuda_module(void);

const struct ncf_cuda_api *ncf_cuda_module(void)
{
	return ncf_cuda_module_emu();
}
