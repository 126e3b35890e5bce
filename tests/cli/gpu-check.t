#!/bin/sh
# gpu-check.t - scripts/gpu-check.sh, the one call a session with a GPU
# makes, checked where there is none: without a GPU every GPU stage is
# "skipped: no GPU" in the summary table and the exit status is 3; the dry
# run lists the stages with limits within the budget; with the GPU stages
# forced on (NCF_GPU_CHECK_ASSUME_GPU=1) failing stages are recorded as FAIL
# and the next ones still run; a budget too small for any stage skips them
# all as out of time.  --no-build throughout: the build is make's.
. "$(dirname "$0")/../lib.sh"
script=$NCF_ROOT/scripts/gpu-check.sh
OUT=$T/out # the script's logs go there (else to a kept temporary directory)
export OUT
gpu_usable && skip_all "a GPU is usable: run scripts/gpu-check.sh itself"

run sh "$script" --quick --no-build
is "$status" 3 "--quick without a GPU: exit 3"
like "$out" '^=== summary: quick' "the summary follows"
for s in data parity epochs inference step_paths sanitizer; do
	like "$out" "^$s +skipped: no GPU" "$s: skipped: no GPU"
done
like "$out" '^build +skipped: --no-build' "build: skipped: --no-build"
like "$out" '^skipped: build \(--no-build\), data \(no GPU\), parity \(no GPU\), epochs \(no GPU\), inference \(no GPU\), step_paths \(no GPU\), sanitizer \(no GPU\)$' \
	"the skipped stages in one line"
like "$out" '^training samples/s:' "the table has the training row"
like "$out" '^inference \(ncf-infer --bench' "... inference"
like "$out" '^parity: not run' "... parity"
like "$out" '^time to the target on synthetic ml-20m: not run' "... time to the target"

run sh "$script" --dry-run
is "$status" 0 "--dry-run: exit 0"
like "$out" '^gpu-check: full, budget 540 s, dry run' "--dry-run: the mode and budget"
for s in build data parity epochs step_paths inference bench_gpu target gpu_tests sanitizer; do
	like "$out" "^  $s +[0-9]+ s  (gpu|cpu)  st_" "--dry-run lists $s with its limit"
done
awk '$3 == "s" && ($4 == "gpu" || $4 == "cpu") { if ($2 > 540) bad = 1 } END { exit bad }' "$out"
ok $? "--dry-run: no stage's limit is over the budget"
run sh "$script" --dry-run --quick
awk '$3 == "s" && ($4 == "gpu" || $4 == "cpu") { if ($2 > 240) bad = 1; n++ } END { exit bad || n != 7 }' "$out"
ok $? "--dry-run --quick: seven stages, none over 240 s"

NCF_GPU_CHECK_ASSUME_GPU=1 run sh "$script" --quick --no-build
is "$status" 1 "GPU stages forced on without a GPU: exit 1"
like "$out" '^data +PASS' "data (ncf-prep) passes"
for s in parity epochs inference step_paths; do
	like "$out" "^$s +FAIL \(exit [0-9]+\)" "$s: FAIL, and the run goes on"
done
like "$out" '^sanitizer +skipped: by itself' "sanitizer: skipped by itself (its test skips)"
like "$out" '^parity \(gpu_parity, ml-1m\): FAIL, 0 of 0 checks' "the table says parity failed"
like "$out" '^=== epochs \(limit 45 s, at [0-9]+ s\)' "each stage prints its limit and start"
like "$out" '^=== epochs: FAIL \(exit 1\) in [0-9]+ s' "... and its time"

NCF_GPU_CHECK_ASSUME_GPU=1 NCF_GPU_CHECK_BUDGET=10 run sh "$script" --quick --no-build
is "$status" 1 "a budget of 10 s: exit 1"
like "$out" '^data +skipped: out of time' "a stage that would get under 15 s is skipped"
unlike "$out" '^=== data \(limit' "... and not started"
done_testing
