#!/bin/sh
# gpu-check.t - scripts/gpu-check.sh, the one call a session with a GPU
# makes, checked where there is none, with a fake nvidia-smi and nvcc first
# on PATH: the dry-run plans of both modes, built or from the bundle, fit
# their budgets (the sum printed and checked; --quick --bundle in 300 s)
# with the sanitizer before any stage that times ncf, and a plan over its
# budget is refused (exit 2); the driver check refuses with one line and
# exit 3 when there is no driver, an old one, no nvcc or a GPU nvcc cannot
# build for, and nothing else runs; with --bundle it needs no nvcc and
# refuses, the same way, a GPU the bundle has no code for, a driver too old
# for the bundle's CUDA, a damaged bundle, a glibc older than it needs, a
# program whose library is not in it and a CUDA library found nowhere (one
# that the module's run path misses is looked for in CUDA_HOME and among
# python3's nvidia-* wheels, and the check passes), a driver check cut by its limit names the step it was in,
# and --bundle without a bundle exits 2; a build that fails says "build failed" with make's last lines
# and skips the GPU stages as such, never "no GPU"; past the driver check,
# without a usable GPU every GPU stage is "skipped: no GPU" and the exit
# status is 3; with the GPU stages forced on (NCF_GPU_CHECK_ASSUME_GPU=1)
# failing stages are recorded as FAIL, a stage cut by its limit as FAIL
# (time limit), the next ones still run, and a variant of the dense layers whose speed run
# fails is run once more with NCF_CUDA_SYNC=1; the five slowest launches of
# a real NCF_CUDA_PROFILE table (the emulated module's) reach the summary.
# $OUT/gpu-check holds four files, summary.txt the table, rewritten as
# stages end, nvidia-smi dmon records the run and ends with it, and a TERM stops the stage that runs and records it with the
# table.
# (tests/cli/gpu-rehearse.t runs the whole check on the emulated module.)
. "$(dirname "$0")/../lib.sh"
script=$NCF_ROOT/scripts/gpu-check.sh
OUT=$T/out # the script's logs go there (else to a kept temporary directory)
export OUT
gpu_usable && skip_all "a GPU is usable: run scripts/gpu-check.sh itself"
cd "$T" || bail "no $T"

# A fake driver and toolkit: FAKE_DRIVER, FAKE_CC (compute capability),
# FAKE_CUDA (nvcc's release), FAKE_SMI_FAIL (nvidia-smi fails as it does
# without a driver), FAKE_NO_CC (an nvidia-smi too old to know compute_cap),
# FAKE_SMI_HANG (nvidia-smi hangs, as on a wedged driver).
mkdir -p fake nvcc
cat >fake/nvidia-smi <<'EOF'
#!/bin/sh
[ -z "${FAKE_SMI_HANG:-}" ] || exec sleep 30
if [ -n "${FAKE_SMI_FAIL:-}" ]; then
	echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
	exit 9
fi
case "$*" in
*compute_cap*)
	if [ -n "${FAKE_NO_CC:-}" ]; then
		echo 'Field "compute_cap" is not a valid field to query.'
		exit 2
	fi
	echo "$FAKE_DRIVER, $FAKE_CC, NVIDIA H200"
	;;
*--query-gpu=driver_version*) echo "$FAKE_DRIVER" ;;
*dmon*)
	echo "#Time gpu pwr"
	echo $$ >>"$FAKE_PIDS"
	exec sleep 60
	;;
*) echo "(a fake nvidia-smi)" ;;
esac
EOF
cat >nvcc/nvcc <<'EOF'
#!/bin/sh
case "$1" in
--version) printf 'nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release %s, V%s.48\n' \
	"$FAKE_CUDA" "$FAKE_CUDA" ;;
--list-gpu-code) printf 'sm_75\nsm_80\nsm_86\nsm_89\nsm_90\nsm_100\nsm_120\n' ;;
esac
EOF
chmod +x fake/nvidia-smi nvcc/nvcc
# PATH without any real nvcc, for the fakes to stand alone
bare=$(echo "$PATH" | tr : '\n' | while read -r d; do [ -x "$d/nvcc" ] || printf '%s:' "$d"; done)
bare=${bare%:}
FAKE_DRIVER=580.82.07 FAKE_CC=9.0 FAKE_CUDA=13.0
FAKE_PIDS=$T/dmon.pids # the fake nvidia-smi dmon: one pid a line
export FAKE_DRIVER FAKE_CC FAKE_CUDA FAKE_PIDS CUDA_HOME=nocuda
unset NVCC
with_fakes() { PATH=$T/fake:$T/nvcc:$bare "$@"; }

# --- the plans ---
# (a bundle for the plans and the driver checks: a MANIFEST and its sums)
mkdir -p fb/bin fb/lib
printf 'commit\tabc\ncuda\t13.0\ngpu_arch\tsm_80 sm_90\nx86_64_level\tx86-64-v3\nglibc_needed\t2.17\n' >fb/MANIFEST
(cd fb && sha256sum MANIFEST >SHA256SUMS)
NCF_GPU_BUNDLE=$T/fb
export NCF_GPU_BUNDLE
for m in quick full; do
	for src in build bundle; do
		[ $m = quick ] && b=300 || b=480
		[ $src = build ] && b=$((b + 60))
		run sh "$script" --dry-run $([ $m = quick ] && echo --quick) $([ $src = bundle ] && echo --bundle)
		is "$status" 0 "--dry-run ($m, $src): exit 0"
		like "$out" "^gpu-check: $m, budget $b s, dry run" "--dry-run ($m, $src): the mode and budget"
		awk -v b=$b '$3 == "s" && ($4 == "gpu" || $4 == "cpu") { s += $2; n++ }
			$1 == "total" { t = $2 } END { exit !(n > 0 && s == t && t <= b) }' "$out"
		ok $? "--dry-run ($m, $src): the limits add up to the total printed, within $b s"
	done
done
like "$out" '^  programs: the bundle .*fb \(commit abc, sm_80 sm_90, x86-64-v3\); nothing built' \
	"--bundle: the plan names the bundle"
unlike "$out" '^  build ' "--bundle: no build stage"
like "$out" '^  driver +18 s  cpu  ' "the driver check is first"
awk '$3 == "s" { printf "%s ", $1 } END { print "" }' "$out" >order
is "$(cat order)" "driver device data sanitizer parity dense epochs inference peer bench_gpu target gpu_tests mpi total " \
	"the full plan's order (--bundle)"
run sh "$script" --dry-run --quick
awk '$3 == "s" { printf "%s ", $1 } END { print "" }' "$out" >order
is "$(cat order)" "driver build device data sanitizer parity dense epochs inference peer total " \
	"the quick plan's order: the sanitizer right after the data, before any stage that times ncf"
run sh "$script" --dry-run --quick --bundle
like "$out" '^  total +(2[0-9][0-9]|300) s  of a budget of 300 s' "--quick --bundle: 300 s at most, all in"
like "$out" '^  peer .*ncf.py -e 1 \(TF32, --amp\) beside ncf-train' "... NVIDIA's NCF included"
like "$out" 'once more with NCF_CUDA_SYNC=1 --steps 1' "... saying that a failing variant is rerun"

NCF_GPU_CHECK_BUDGET=200 run sh "$script" --quick --no-build
is "$status" 2 "a plan over its budget is refused: exit 2"
expect gpu-check-over-budget "$err" "... saying so"
NCF_GPU_CHECK_LIMITS=sanitizer=40,epochs=12 run sh "$script" --dry-run --quick
like "$out" '^  sanitizer +40 s' "NCF_GPU_CHECK_LIMITS sets a stage's limit"
like "$out" '^  total +342 s' "... and the sum follows"
NCF_GPU_CHECK_LIMITS=sanity=40 run sh "$script" --dry-run --quick
is "$status" 2 "NCF_GPU_CHECK_LIMITS naming no stage: exit 2"
expect gpu-check-bad-limit "$err" "... saying so"

# --- the driver check: one line, exit 3, nothing else run ---
# driver_refused NAME MSG: the last run was refused by the driver check
driver_refused() {
	is "$status" 3 "$2: exit 3"
	expect "$1" "$err" "$2: the line"
	unlike "$out" '^===' "$2: no stage ran"
}
if command -v nvidia-smi >/dev/null 2>&1; then
	skip "no nvidia-smi: this machine has one"
else
	PATH=$T/nvcc:$bare run sh "$script" --quick --no-build
	driver_refused gpu-check-no-smi "no nvidia-smi"
fi
FAKE_SMI_FAIL=1 with_fakes run sh "$script" --quick --no-build
driver_refused gpu-check-no-driver "nvidia-smi without a driver"
FAKE_SMI_HANG=1 NCF_GPU_CHECK_LIMITS=driver=2 with_fakes run sh "$script" --quick --no-build
driver_refused gpu-check-driver-hangs "nvidia-smi hangs: the driver check's limit"
FAKE_DRIVER=575.51.03 with_fakes run sh "$script" --quick --no-build
driver_refused gpu-check-old-driver "driver 575 with CUDA 13.0"
FAKE_DRIVER=470.256.02 FAKE_NO_CC=1 with_fakes run sh "$script" --quick --no-build
driver_refused gpu-check-older-driver "driver 470, whose nvidia-smi knows no compute_cap"
PATH=$T/fake:$bare run sh "$script" --quick --no-build
driver_refused gpu-check-no-nvcc "no nvcc"
FAKE_CC=6.0 with_fakes run sh "$script" --quick --no-build
driver_refused gpu-check-arch "a GPU nvcc cannot build for"
FAKE_DRIVER=535.104.05 FAKE_CUDA=12.4 with_fakes run sh "$script" --quick --no-build
unlike "$err" 'too old' "driver 535 with CUDA 12.4 passes (12.x needs 525.60.13)"

# --- the driver check with --bundle: no nvcc needed, the bundle checked ---
NCF_GPU_BUNDLE=$T/none run sh "$script" --quick --bundle
is "$status" 2 "--bundle without a bundle: exit 2"
like "$err" "^gpu-check: --bundle: no .*/none/MANIFEST: run make gpu-bundle on a build machine and carry" \
	"... saying what to do: $(head -n 1 "$err")"
# the bundle's part of the driver check cut by its limit: the line says so
mkdir -p slow && printf '#!/bin/sh\nexec sleep 30\n' >slow/sha256sum && chmod +x slow/sha256sum
NCF_GPU_CHECK_LIMITS=driver=2 PATH=$T/slow:$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "the driver check's limit passed in the bundle's checks: exit 3"
like "$err" "^gpu-check: the driver check did not end in 2 s: it was checking the bundle's SHA256SUMS$" \
	"... naming the step, not nvidia-smi"
FAKE_DRIVER=575.51.03 PATH=$T/fake:$bare run sh "$script" --quick --bundle
driver_refused gpu-check-bundle-old-driver "--bundle, no nvcc: driver 575 with the bundle's CUDA 13.0"
FAKE_CC=8.6 PATH=$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "--bundle on a GPU it has no code for: exit 3"
like "$err" "^gpu-check: the bundle has no code for the NVIDIA H200: compute capability 8.6 \(sm_86\) is not among its sm_80 sm_90" \
	"... saying so"
cp -R fb bad && echo changed >>bad/MANIFEST
NCF_GPU_BUNDLE=$T/bad PATH=$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "a damaged bundle: exit 3"
like "$err" "^gpu-check: the bundle .*bad is damaged or incomplete: MANIFEST: FAILED" "... saying which file"
rm -rf bad && cp -R fb bad && sed -i 's/^glibc_needed.*/glibc_needed	99.1/' bad/MANIFEST &&
	(cd bad && sha256sum MANIFEST >SHA256SUMS)
NCF_GPU_BUNDLE=$T/bad PATH=$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "a bundle that needs a newer glibc: exit 3"
like "$err" "^gpu-check: this machine's glibc [0-9.]+ is older than the bundle's programs need \(99.1\)" \
	"... saying so"
rm -rf bad && cp -R fb bad && cp "$NCF_BIN/ncf-train" bad/bin/ &&
	(cd bad && sha256sum MANIFEST bin/ncf-train >SHA256SUMS)
NCF_GPU_BUNDLE=$T/bad PATH=$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "a bundle whose program needs a library it lacks: exit 3"
like "$err" "^gpu-check: the bundle's programs need libraries this machine lacks: bin/ncf-train: not in the bundle: .*libzstd.so.1" \
	"... naming the program and the library"
# a module whose CUDA library is on no path the loader searches: found in CUDA_HOME
mkdir -p cudah/lib64 cb/lib/ncf && cp fb/MANIFEST cb/
echo 'int lt(void) { return 0; }' >lt.c && echo 'int lt(void); int f(void) { return lt(); }' >m.c
if cc -shared -fPIC lt.c -Wl,-soname,libcublasLt.so.99 -o cudah/lib64/libcublasLt.so.99 2>/dev/null &&
	cc -shared -fPIC m.c cudah/lib64/libcublasLt.so.99 -o cb/lib/ncf/ncf-cuda.so 2>/dev/null; then
	(cd cb && sha256sum MANIFEST lib/ncf/ncf-cuda.so >SHA256SUMS)
	NCF_GPU_BUNDLE=$T/cb PATH=$T/fake:$bare run sh "$script" --quick --bundle
	is "$status" 3 "a CUDA library found nowhere: exit 3"
	like "$err" "^gpu-check: the bundle's programs need libraries this machine lacks: lib/ncf/ncf-cuda.so: not in the bundle: libcublasLt.so.99 \(not found\)" \
		"... naming it"
	CUDA_HOME=$T/cudah NCF_GPU_BUNDLE=$T/cb PATH=$T/fake:$bare run sh "$script" --quick --bundle
	like "$out" "^gpu-check: CUDA's libraries \(libcublasLt.so.99\) from .*cudah/lib64$" \
		"... found in CUDA_HOME when it is there, and said"
	like "$out" '^driver: NVIDIA H200' "... the driver check then passes"
	# or among the nvidia-* wheels of python3 (PyTorch's), as nvidia/cu13/lib
	mkdir -p py/nvidia/cu13/lib && cp cudah/lib64/libcublasLt.so.99 py/nvidia/cu13/lib/
	PYTHONPATH=$T/py NCF_GPU_BUNDLE=$T/cb PATH=$T/fake:$bare run sh "$script" --quick --bundle
	like "$out" "^gpu-check: CUDA's libraries \(libcublasLt.so.99\) from .*py/nvidia/cu13/lib$" \
		"... found among python3's nvidia-* wheels when CUDA_HOME lacks it"
else
	skip "no C compiler for a module with a CUDA library"
	skip "no C compiler for a module with a CUDA library"
	skip "no C compiler for a module with a CUDA library"
	skip "no C compiler for a module with a CUDA library"
	skip "no C compiler for a module with a CUDA library"
fi
PATH=$T/fake:$bare run sh "$script" --quick --bundle
is "$status" 3 "--bundle, past the driver check, without a usable GPU: exit 3"
like "$out" '^driver: NVIDIA H200, compute capability 9.0 \(GPU_ARCH=90\), driver 580.82.07, CUDA 13.0 \(the bundle.s\): CUDA 13.x needs 580 or newer; bundle .*fb: commit abc, sm_80 sm_90, x86-64-v3$' \
	"... the driver line names the bundle"
like "$out" '^build +skipped: --bundle' "... and nothing is built"
like "$out" "^gpu-check: no usable GPU here.* \(no .*fb/bin/ncf-train\)" "... the bundle's tools are the ones looked for"
unset NCF_GPU_BUNDLE

# --- a build that fails: "build failed", make's last lines, never "no GPU" ---
mkdir -p fmake
printf '#!/bin/sh\necho "libcsv                       not found"\necho "configure: libcsv is missing: apt-get install libcsv-dev"\nexit 2\n' \
	>fmake/make
chmod +x fmake/make
NCF_GPU_CHECK_LIMITS=build=20 PATH=$T/fmake:$T/fake:$T/nvcc:$bare run sh "$script" --quick
is "$status" 1 "a failed build: exit 1"
like "$out" '^gpu-check: build failed \(make exit 2\); its last lines:' "the build stage says it failed"
like "$out" '^  configure: libcsv is missing' "... with configure's last lines"
like "$out" '^build +FAIL' "the table: build FAIL"
like "$out" '^build failed: .*configure: libcsv is missing' "... and why, under the table"
for s in device data sanitizer parity dense epochs inference peer; do
	like "$out" "^$s +skipped: build failed" "$s: skipped: build failed"
done
unlike "$out" 'no GPU' "never 'no GPU'"

# --- past the driver check, no usable GPU (and no tar: Python packs the logs) ---
mkdir -p notar && printf '#!/bin/sh\nexit 127\n' >notar/tar && chmod +x notar/tar
rm -rf "$OUT"
PATH=$T/notar:$T/fake:$T/nvcc:$bare run sh "$script" --quick --no-build
is "$status" 3 "--quick without a usable GPU: exit 3"
tar -tzf "$OUT/gpu-check/logs.tar.gz" >notar.list 2>&1
like notar.list '^\./driver\.txt$' "... its logs packed by python3's tarfile where tar fails"
like "$out" '^driver: NVIDIA H200, compute capability 9.0 \(GPU_ARCH=90\), driver 580.82.07, CUDA 13.0 \(nvcc\): CUDA 13.x needs 580 or newer$' \
	"the driver check's line"
like "$out" '^=== summary: quick' "the summary follows"
awk '/^=== summary/ { s = 1 } s && /^driver: / { f = 1 } END { exit !f }' "$out"
ok $? "the summary has the driver check's line"
for s in device data sanitizer parity dense epochs inference peer; do
	like "$out" "^$s +skipped: no GPU" "$s: skipped: no GPU"
done
like "$out" '^build +skipped: --no-build' "build: skipped: --no-build"
like "$out" '^skipped: build \(--no-build\), device \(no GPU\), data \(no GPU\), sanitizer \(no GPU\), parity \(no GPU\), dense \(no GPU\), epochs \(no GPU\), inference \(no GPU\), peer \(no GPU\)$' \
	"the skipped stages in one line"
like "$out" '^the dense layers: not run' "the table: the dense layers"
like "$out" "^NVIDIA's NCF: not run" "... NVIDIA's NCF"
like "$out" '^parity: not run' "... parity"
like "$out" '^compute-sanitizer: not run' "... the sanitizer"

# --- the GPU stages forced on: failures and a stage cut by its limit ---
NCF_GPU_CHECK_ASSUME_GPU=1 NCF_GPU_CHECK_LIMITS=data=2 with_fakes run sh "$script" --quick --no-build
is "$status" 1 "GPU stages forced on without a GPU: exit 1"
like "$out" '^=== data \(limit 2 s, at [0-9]+ s\)' "each stage prints its limit and start"
like "$out" '^data +FAIL \(time limit\)' "data (ml-20m in 2 s): FAIL (time limit)"
for s in device parity dense epochs inference; do
	like "$out" "^$s +FAIL \(exit [0-9]+\)" "$s: FAIL, and the run goes on"
done
like "$out" '^  fused bf16 failed; once more with NCF_CUDA_SYNC=1 --steps 1: .*no usable GPU' \
	"a variant whose speed run failed is run once more with NCF_CUDA_SYNC=1, its message in the table"
like "$out" '^sanitizer +skipped: by itself' "sanitizer: skipped by itself (its test skips)"
like "$out" '^=== epochs: FAIL \(exit 1\) in [0-9]+ s' "... with its time"
like "$out" '^parity with NCF_CUDA_DENSE=fused \(gpu_parity, synthetic ml-1m\): FAIL, 0 of [0-9]+ checks' \
	"the table says parity failed"
# the cost model needs no GPU: its figures are in the table, the measured ones are not
for v in fused lt plain fused-nograph timed; do
	like "$out" "^  $v +bf16 +- +- +[0-9.MK-]+ +[0-9.]+M +[0-9.]+ +[0-9]+\$" \
		"the dense layers $v: the model's figures (it needs no GPU), no measured ones"
done

# --- what the device tool brings back: four files, rewritten as stages end ---
is "$(cd "$OUT/gpu-check" && ls | tr '\n' ' ')" "logs.tar.gz metrics.tsv results.tsv summary.txt " \
	"\$OUT/gpu-check: four files (the device tool brings back 8 at most)"
like "$OUT/gpu-check/summary.txt" '^epochs +FAIL \(exit 1\)' "summary.txt: the table"
tar -tzf "$OUT/gpu-check/logs.tar.gz" >logs.list 2>&1
like logs.list '^\./dense\.log$' "logs.tar.gz: every stage's log"
like logs.list '^\./dmon\.txt$' "... and nvidia-smi dmon's record of the run"
# a call cut short by a signal (the device tool's limit): the stage that
# runs stopped and recorded, the table printed and in $OUT
rm -rf "$OUT"
# (not through with_fakes: $! must be the script's own)
PATH=$T/fake:$T/nvcc:$bare NCF_GPU_CHECK_ASSUME_GPU=1 NCF_GPU_CHECK_BUDGET=400 NCF_GPU_CHECK_LIMITS=data=60 \
	sh "$script" --quick --no-build >sig.out 2>sig.err &
pid=$!
i=0
until grep -q '^device	' "$OUT/gpu-check/results.tsv" 2>/dev/null || [ $i -ge 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
sleep 1
kill -TERM $pid
wait $pid
is "$?" 143 "TERM during a stage: exit 143"
like sig.out '^gpu-check: stopped by SIGTERM at [0-9]+ s$' "... saying so"
like sig.out '^data +FAIL \(killed: SIGTERM\) +[0-9]+ s$' "... the stage that ran recorded as killed, in the table"
like "$OUT/gpu-check/summary.txt" '^device +FAIL' "... and summary.txt holds the stages that ended"
like "$OUT/gpu-check/summary.txt" '^data +FAIL \(killed: SIGTERM\)' "... and the one killed"
unlike sig.out '^=== sanitizer' "... and nothing after it ran"
# every nvidia-smi dmon started (one per run past the driver check) ended with its run
left=$(for p in $(cat dmon.pids); do kill -0 "$p" 2>/dev/null && echo "$p"; done)
[ -s dmon.pids ] && [ -z "$left" ]
ok $? "nvidia-smi dmon ran beside each run and ended with it ($(wc -l <dmon.pids) runs)"

# --- the profile's five slowest launches, from a real NCF_CUDA_PROFILE table ---
emu=$NCF_ROOT/build/lib/ncf/ncf-cuda-emu.so
if [ -n "${NCF_SANITIZER:-}" ] || [ ! -f "$emu" ]; then
	skip "no emulated module (or under the sanitizers)"
else
	ncf-prep -q --synthetic tiny -o t.ncfc || bail "ncf-prep failed"
	NCF_CUDA_MODULE=$emu NCF_CUDA_PROFILE=1 "$NCF_ROOT/build/bench/bench_gpu" --precisions bf16 \
		--no-epoch --steps 1 --warmup 0 --batch 512 t.ncfc >prof.out 2>prof.txt
	mkdir -p logs work && : >logs/metrics.tsv && : >logs/results.tsv
	logs=$T/logs work=$T/work sh "$script" --run-stage profile_slowest fused "$T/prof.txt" >slow.out
	awk '$1 == "cuda" && $2 == "profile:" && $3 ~ /^[0-9]+$/ { print $7 }' prof.txt |
		sort -g -r | head -n 5 >want
	awk -F'\t' '{ print $6 }' logs/metrics.tsv >got
	cmp -s want got && [ "$(wc -l <got)" = 5 ]
	ok $? "the five slowest launches, slowest first ($(tr '\n' ' ' <got)us)"
	logs=$T/logs mode=quick budget=240 spent=0 sh "$script" --run-stage summary >sum.out
	like sum.out '^the five slowest launches per variant' "the summary lists them"
	first=$(awk -F'\t' 'NR == 1 { print $4 " +" $5 }' logs/metrics.tsv)
	like sum.out "^  fused +1 $first +[0-9.]+ +[0-9.]+% +[0-9.]+ [a-z]+ " \
		"... the slowest first ($first), with its share, the model's time and what binds it"
fi
done_testing
