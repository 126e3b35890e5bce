#!/bin/sh
# test_cuda_emu_lazy.t - the emulation test again with every stream lazy
# (NCF_EMU_LAZY=1, kernels/cuda/emu.h): each operation runs as late as its
# synchronisations and events allow, so a result read, a buffer reused or a
# stream used before the work it depends on is ordered shows as a failed
# check.  The checks are those of test_cuda_emu.
: "${NCF_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
bin=$NCF_ROOT/build/tests/test_cuda_emu
if [ ! -x "$bin" ]; then
	echo "1..0 # SKIP no emulation test built (needs a C++ compiler)"
	exit 0
fi
NCF_EMU_LAZY=1 exec "$bin"
