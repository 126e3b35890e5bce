#!/bin/sh
# module.t - the cuda backend as a module the tools open on demand
# (kernels/module.h): the tools link nothing of CUDA and a CPU run maps
# none of it; the emulated module (build/lib/ncf/ncf-cuda-emu.so, the cuda
# backend's code on the CPU) trains, evaluates and scores through the tools
# as a GPU would; a module of another ABI, a file that is no module, a
# module that is missing are each refused with the reason and exit 3; make
# install puts the module where the installed tools find it.
. "$(dirname "$0")/../lib.sh"
cd "$T"
emu=$NCF_ROOT/build/lib/ncf/ncf-cuda-emu.so
real=$NCF_ROOT/build/lib/ncf/ncf-cuda.so
ncf-prep -q --synthetic tiny -o t.ncfc || bail "ncf-prep failed"

# libs CMD...: the shared objects the dynamic loader opened for CMD (LD_DEBUG).
libs() { LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\([^ ]*\) .*generating link map.*/\1/p'; }

for t in ncf-prep ncf-train ncf-eval ncf-infer; do
	! ldd "$NCF_BIN/$t" | grep -Eq 'libcuda|libcublas|libnccl'
	ok $? "$t links no CUDA library"
done
libs ncf-train --help >h.libs
! grep -Eq 'cuda|cublas|nccl' h.libs
ok $? "ncf-train --help maps no CUDA library ($(wc -l <h.libs) libraries)"
libs ncf-train --device cpu -q -e 1 -b 512 t.ncfc -o c.ncfm >c.libs
! grep -Eq 'cuda|cublas|nccl' c.libs
ok $? "a --device cpu run maps no CUDA library"
libs ncf-eval -q -m c.ncfm t.ncfc >e.libs
! grep -Eq 'cuda|cublas|nccl' e.libs
ok $? "ncf-eval with --device auto on a machine without a driver maps no CUDA library"

# A program copied away from build/ finds no module: auto is the CPU, cuda exits 3.
mkdir -p away/bin
cp "$NCF_BIN/ncf-train" away/bin/
run env -u NCF_CUDA_MODULE away/bin/ncf-train --device cuda -q -e 1 -b 512 t.ncfc -o a.ncfm
is "$status" 3 "--device cuda without the module exits 3"
like "$err" "no usable GPU: no cuda module \(ncf-cuda.so\) beside this program or in " \
	"and says there is no module: $(head -n 1 "$err")"

if [ -n "${NCF_SANITIZER:-}" ]; then
	skip "the emulated module is not built with the sanitizers"
	done_testing
fi
if [ ! -f "$emu" ]; then
	skip "no emulated module (no C++ compiler)"
	done_testing
fi

# The tools with the emulated module: the cuda backend through every tool.
export NCF_CUDA_MODULE="$emu"
ncf-train -vV >v.out 2>&1
like v.out "^cuda module	.*ncf-cuda-emu.so \(cuda, emulated on the CPU, ABI [0-9]+\)" \
	"-vV names the module it opened"
run ncf-train --device cuda -e 2 -b 512 -s 3 t.ncfc -o g.ncfm --log g.log
ok "$status" "ncf-train --device cuda trains on the emulated module"
grep '"summary": true' g.log | grep -q '"dense_layer_2": "fused (' &&
	grep '"summary": true' g.log | grep -q '"dense_layer_3": "fused ('
ok $? "the log's summary says how each dense layer ran: $(grep -o '"dense_layer_2": "[^"]*"' g.log)"
ncf-train --device cuda -v -e 1 -b 512 t.ncfc -o v.ncfm 2>v.err
grep -q '^ncf-train: cuda backend: dense layer 2: fused (.*fixed order)$' v.err
ok $? "-v says each dense layer's implementation and how it was chosen"
NCF_CUDA_DENSE=plain,bogus ncf-train --device cuda -q -e 1 -b 512 t.ncfc -o b.ncfm 2>b.err
st=$?
[ $st -eq 1 ] && grep -q "NCF_CUDA_DENSE: 'bogus' is not fused, lt or plain" b.err
ok $? "a bad NCF_CUDA_DENSE is refused (exit $st): $(head -n 1 b.err)"
like "$err" "cuda backend" "and says it trains on the cuda backend"
ncf-train --device cpu -q -e 2 -b 512 -s 3 t.ncfc -o p.ncfm
ncf-eval --device cpu -m g.ncfm t.ncfc >g.cpu
ncf-eval --device cuda -m g.ncfm t.ncfc >g.cuda
ok $? "ncf-eval --device cuda evaluates on the emulated module"
# the two backends compute the same function in other orders (float sums):
# the metrics of one model agree to rounding (HR over 50 users: exactly, but
# for a tie that rounding can flip: 1/50)
awk -F'\t' 'NR == FNR { a[$1] = $2; next } $1 in a { d = a[$1] - $2; if (d < 0) d = -d;
	if (d > 0.02 + 1e-9) bad = 1 } END { exit bad }' g.cpu g.cuda
ok $? "the same model evaluates alike on cpu and emulated cuda ($(tr '\t\n' '= ' <g.cuda))"
printf '1 1\n2 2\n3 3\n' | ncf-infer --score --device cuda -m g.ncfm >s.cuda
printf '1 1\n2 2\n3 3\n' | ncf-infer --score --device cpu -m g.ncfm >s.cpu
awk 'NR == FNR { a[FNR] = $NF; next } { d = a[FNR] - $NF; if (d < 0) d = -d; if (d > 1e-5) bad = 1 }
	END { exit bad || NR != 6 }' s.cpu s.cuda
ok $? "ncf-infer --score on the emulated module gives the cpu backend's probabilities (1e-5)"
ncf-train --device auto -v -e 1 -b 512 t.ncfc -o u.ncfm 2>u.err
like u.err "cuda backend" "--device auto takes the module NCF_CUDA_MODULE names"

# Modules that cannot be used.
cat >bad.c <<'EOF'
#include <stdint.h>
#include <stddef.h>
struct api { uint32_t abi, backend_size, table_size; const char *version, *kind; };
static const struct api a = {999, 1, 2, "9.9.9", "cuda"};
const struct api *ncf_cuda_module(void) { return &a; }
EOF
if cc -shared -fPIC bad.c -o bad.so 2>/dev/null; then
	run env NCF_CUDA_MODULE="$T/bad.so" ncf-train --device cuda -q -e 1 -b 512 t.ncfc -o b.ncfm
	is "$status" 3 "a module of another ABI is refused with exit 3"
	like "$err" "bad.so is of ncf 9.9.9, ABI 999 .*; this program needs ABI [0-9]+ .*install the module built with it" \
		"naming both ABIs: $(head -n 1 "$err")"
	[ ! -e b.ncfm ]
	ok $? "and writes no model"
else
	skip "no C compiler for a module of another ABI"
fi
echo 'not a shared object' >junk.so
run env NCF_CUDA_MODULE="$T/junk.so" ncf-train --device cuda -q -e 1 -b 512 t.ncfc -o j.ncfm
is "$status" 3 "a file that is no module is refused with exit 3"
like "$err" "no usable GPU: .*junk.so: .*(invalid ELF header|file too short)" \
	"in the dynamic loader's words: $(head -n 1 "$err")"
run env NCF_CUDA_MODULE="$T/none.so" ncf-train --device cuda -q -e 1 -b 512 t.ncfc -o n.ncfm
is "$status" 3 "NCF_CUDA_MODULE naming no file: exit 3"
like "$err" "NCF_CUDA_MODULE=.*none.so: No such file or directory" "and why"
unset NCF_CUDA_MODULE

# make install puts the module beside the tools it installs (the real one, where CUDA is).
if [ -f "$real" ]; then
	make -s -C "$NCF_ROOT" install DESTDIR="$T/inst" PREFIX=/opt/ncf >inst.log 2>&1
	ok $? "make install DESTDIR=... PREFIX=/opt/ncf"
	[ -f inst/opt/ncf/lib/ncf/ncf-cuda.so ] && [ -x inst/opt/ncf/bin/ncf-train ]
	ok $? "installs bin/ncf-train and lib/ncf/ncf-cuda.so"
	inst/opt/ncf/bin/ncf-train -vV >i.out 2>&1
	like i.out "^cuda module	$T/inst/opt/ncf/lib/ncf/ncf-cuda.so \(cuda, ABI" \
		"the installed ncf-train opens the installed module"
else
	skip "no cuda module built (no CUDA toolkit)"
fi
done_testing
