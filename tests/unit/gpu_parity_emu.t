#!/bin/sh
# gpu_parity_emu.t - the GPU parity checks (tests/gpu/gpu_parity.c) run
# against the CPU emulation of the cuda backend, on tiny data with --smoke,
# eagerly and with lazy streams (NCF_EMU_LAZY=1, kernels/cuda/emu.h), and
# its --fault mode with and without NCF_CUDA_SYNC=1: so that the checks a
# GPU session runs are known to work before a GPU runs them.  The TAP of
# each run is checked here, its lines shown as diagnostics.
. "$(dirname "$0")/../lib.sh"
bin=$NCF_ROOT/build/tests/gpu_parity_emu
[ -x "$bin" ] || skip_all "no emulation build (needs a C++ compiler)"
ncf-prep -q --synthetic tiny -o "$T/d.ncfc" || bail "ncf-prep failed"

# tap_ok NAME CMD...: CMD's TAP passed (exit 0, a plan, no "not ok").
tap_ok() {
	name=$1
	shift
	"$@" >"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	[ $rc -eq 0 ] && grep -q '^1\.\.[1-9]' "$T/$name.out" && ! grep -q '^not ok' "$T/$name.out"
	st=$?
	[ $st -eq 0 ] || { sed 's/^/# /' "$T/$name.out"; sed 's/^/# stderr: /' "$T/$name.err" | head -n 20; }
	return $st
}
tap_ok eager "$bin" "$T/d.ncfc" --smoke
ok $? "gpu_parity --smoke on the emulation: $(grep -c '^ok' "$T/eager.out") checks pass"
tap_ok lazy env NCF_EMU_LAZY=1 "$bin" "$T/d.ncfc" --smoke
ok $? "gpu_parity --smoke on the emulation with lazy streams"

"$bin" "$T/d.ncfc" --fault >"$T/f.out" 2>"$T/f.err"
grep -q '^ok 1 ' "$T/f.out" && grep -q 'a kernel launched before this call failed; NCF_CUDA_SYNC=1 names it' "$T/f.err"
ok $? "gpu_parity --fault: the fault surfaces later, with the hint"
NCF_CUDA_SYNC=1 "$bin" "$T/d.ncfc" --fault >"$T/g.out" 2>"$T/g.err"
grep -q '^ok 1 ' "$T/g.out" && grep -q 'kernel fault_kernel (.*test_hooks.cu:[0-9]*) failed on the device' "$T/g.err"
ok $? "NCF_CUDA_SYNC=1 gpu_parity --fault: the kernel is named"
done_testing
