#!/usr/bin/env bash
# train.t - ncf-train and ncf-eval on synthetic data (no download): the
# same seed gives the same checkpoint bytes for any thread count; --resume
# from an epoch's checkpoint or from an interrupted (SIGINT) state gives the
# bytes of the uninterrupted run; --log, the per-epoch lines and the
# summary, --threshold, a batch larger than the epoch; bad options, models
# that do not fit the cache, damaged checkpoints, a NaN loss and
# --device cuda without a GPU fail with their exit status, a message and
# no output left under a final name; ncf-eval's output and -V.
# Small models (8 factors, layers 16,16,8) keep the file to ~30 s on 2 cores.
. "$(dirname "$0")/../lib.sh"


# --device cpu: bit-for-bit reproducibility is the cpu backend's promise
# (DESIGN.md 4); on a machine with a GPU, auto would take the GPU.
F="--device cpu --factors 8 --layers 16,16,8"
ncf-prep -q -o "$T/tiny.ncfc" --synthetic tiny &&
	ncf-prep -q -o "$T/mls.ncfc" --synthetic ml-latest-small || {
	echo "Bail out! ncf-prep --synthetic failed"
	exit 1
}
C=$T/tiny.ncfc
MLS=$T/mls.ncfc
# tiny's sizes: samples per epoch = training positives x (1 + 4 negatives)
USERS=$(info users "$C")
ITEMS=$(info items "$C")
SAMPLES=$(($(info train_positives "$C") * 5))
have_python=0
command -v python3 >/dev/null && have_python=1

# same A B: the files have the same bytes (both exist)
same() { [ -f "$1" ] && [ -f "$2" ] && cmp -s "$1" "$2"; }
# json_lines FILE N KEY...: FILE holds exactly N lines, each one JSON object
# with every KEY, a number.
json_lines() {
	local file=$1 n=$2
	shift 2
	python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == int(sys.argv[2]), "%d lines" % len(lines)
for l in lines:
    d = json.loads(l)
    assert isinstance(d, dict)
    for k in sys.argv[3:]:
        assert k in d, "no key " + k
        assert isinstance(d[k], (int, float)), k
' "$file" "$n" "$@"
}
LOGKEYS="epoch train_loss hr@10 ndcg@10 train_time eval_time train_throughput eval_throughput save_wait"
# log_lines FILE N KEY...: FILE holds N epoch objects with every KEY, then
# one summary object.
log_lines() {
	local file=$1 n=$2
	shift 2
	head -n "$n" "$file" >"$file.epochs" && json_lines "$file.epochs" "$n" "$@" &&
		[ "$(wc -l <"$file" | tr -d ' ')" = $((n + 1)) ] &&
		tail -n 1 "$file" | grep -q '^{"summary": true, '
}

# ---------------------------------------------------------------------------
# Reproducibility: two runs with one seed, 1 and 2 threads.  ml-latest-small
# sized, so that a step spans several 4096-sample chunks and the item table
# several 2048-row tiles (the pieces kernels/cpu/ hands to threads).
mkdir "$T/rep"
fails=0
for t in 1 2; do
	for k in a b; do
		ncf-train -q --threads $t "$MLS" -o "$T/rep/$t$k.ncfm" $F -b 65536 -e 2 ||
			fails=$((fails + 1))
	done
done
is "$fails" 0 "four runs (threads 1 and 2, twice each) exit 0"
same "$T/rep/1a.ncfm" "$T/rep/1b.ncfm" && same "$T/rep/1a.ncfm.last" "$T/rep/1b.ncfm.last"
ok $? "--threads 1 twice: the same MODEL and MODEL.last bytes"
same "$T/rep/2a.ncfm" "$T/rep/2b.ncfm" && same "$T/rep/2a.ncfm.last" "$T/rep/2b.ncfm.last"
ok $? "--threads 2 twice: the same MODEL and MODEL.last bytes"
same "$T/rep/1a.ncfm" "$T/rep/2a.ncfm" && same "$T/rep/1a.ncfm.last" "$T/rep/2a.ncfm.last"
ok $? "--threads 1 and --threads 2: the same bytes"
is "$(ls "$T/rep" | tr '\n' ' ')" \
	"1a.ncfm 1a.ncfm.last 1b.ncfm 1b.ncfm.last 2a.ncfm 2a.ncfm.last 2b.ncfm 2b.ncfm.last " \
	"MODEL and MODEL.last only, no temporaries left"
ncf-train -q --threads 2 "$MLS" -o "$T/rep/s2.ncfm" $F -b 65536 -e 2 -s 2
! cmp -s "$T/rep/1a.ncfm.last" "$T/rep/s2.ncfm.last"
ok $? "another seed gives other bytes"

# ---------------------------------------------------------------------------
# Checkpoints are written by a thread while the next epoch trains: the same
# bytes as written between epochs (NCF_SAVE_SYNC=1), every file whole at
# the end; a write that fails ends the run with status 1 at the next epoch
# boundary (background) or at once (NCF_SAVE_SYNC), naming the file.
mkdir "$T/bg"
run ncf-train "$C" -o "$T/bg/b.ncfm" $F -b 512 -e 3 --keep-epochs
is "$status" 0 "background checkpoints, 3 epochs, --keep-epochs: exit 0"
like "$err" '^ncf-train: checkpoints: written while the next epoch trained; training waited [0-9.]+ s for them in all, the last took [0-9.]+ s to write' \
	"the summary says how long training waited for checkpoints"
NCF_SAVE_SYNC=1 ncf-train -q "$C" -o "$T/bg/s.ncfm" $F -b 512 -e 3 --keep-epochs
fails=0
for f in "" .last .epoch-001 .epoch-002 .epoch-003; do
	same "$T/bg/b.ncfm$f" "$T/bg/s.ncfm$f" || fails=$((fails + 1))
done
is "$fails" 0 "MODEL, MODEL.last, MODEL.epoch-001..003: the same bytes written in the background and between epochs"
is "$(cd "$T/bg" && ls | tr '\n' ' ')" \
	"b.ncfm b.ncfm.epoch-001 b.ncfm.epoch-002 b.ncfm.epoch-003 b.ncfm.last s.ncfm s.ncfm.epoch-001 s.ncfm.epoch-002 s.ncfm.epoch-003 s.ncfm.last " \
	"no temporaries left"
if [ -c /dev/full ]; then
	run ncf-train "$C" -o "$T/bg/f.ncfm" $F -b 512 -e 3 --checkpoint /dev/full
	is "$status" 1 "--checkpoint /dev/full: exit 1"
	like "$err" '^ncf-train: /dev/full: write failed: No space left on device' "names the file and the reason"
	like "$err" '^ncf-train: the checkpoints after epoch 1 could not be written \(above\); stopping' \
		"says whose checkpoints were lost and that it stops"
	is "$(grep -c 'epoch [0-9]*/3:' "$err")" 2 \
		"background: found at the next epoch boundary (epoch 2 trained, epoch 3 not)"
	unlike "$err" 'best hr@10' "no summary claiming a saved model"
	[ ! -e "$T/bg/f.ncfm" ]
	ok $? "-o, to be copied from the failed write, not written"
	run env NCF_SAVE_SYNC=1 ncf-train "$C" -o "$T/bg/f.ncfm" $F -b 512 -e 3 --checkpoint /dev/full
	is "$status:$(grep -c 'epoch [0-9]*/3:' "$err")" "1:1" "NCF_SAVE_SYNC=1: exit 1 after epoch 1"
	run ncf-train "$C" -o "$T/bg/f.ncfm" $F -b 512 -e 1 --checkpoint /dev/full
	is "$status" 1 "the last epoch's write failing: exit 1 (the run waits for it)"
	like "$err" 'the checkpoints after epoch 1 could not be written' "the last epoch's failed write is reported"
	run ncf-train -q "$C" -o "$T/bg/n.ncfm" $F -b 512 -e 1 --checkpoint /dev/null
	is "$status" 0 "--checkpoint /dev/null: exit 0"
	ncf-eval -q -m "$T/bg/n.ncfm" "$C" >/dev/null
	ok $? "--checkpoint /dev/null: -o is a whole model (written, not copied from /dev/null)"
else
	for i in 1 2 3 4 5 6 7 8 9 10 11; do skip "no /dev/full"; done
fi

# ---------------------------------------------------------------------------
# Resume from an epoch's checkpoint.
mkdir "$T/res"
R=$T/res/r.ncfm
run ncf-train "$C" -o "$R" $F -b 512 -e 4 --keep-epochs
is "$status" 0 "4 epochs with --keep-epochs: exit 0"
is "$(cd "$T/res" && ls | tr '\n' ' ')" \
	"r.ncfm r.ncfm.epoch-001 r.ncfm.epoch-002 r.ncfm.epoch-003 r.ncfm.epoch-004 r.ncfm.last " \
	"--keep-epochs: MODEL, MODEL.epoch-001..004, MODEL.last"
same "$R.epoch-004" "$R.last"
ok $? "MODEL.epoch-004 is MODEL.last"
run ncf-train "$C" --device cpu --resume "$R.epoch-002" -e 4 -o "$T/res/o.ncfm"
is "$status" 0 "--resume MODEL.epoch-002 -e 4: exit 0"
like "$err" "resuming from $R.epoch-002 at epoch 3, position 0 of " "says where it resumes"
is "$(grep -c 'epoch [0-9]*/4:' "$err")" 2 "runs epochs 3 and 4 only"
same "$T/res/o.ncfm.last" "$R.last"
ok $? "the resumed run's MODEL.last is the uninterrupted run's, byte for byte"
# The summary says where the best model is: in -o when a resumed epoch beat
# the best HR of the epochs before --resume, else that -o was not written.
# Either way it names no file as saved that is not there.
saved=$(sed -n 's/.* saved in \(.*\); latest state in .*/\1/p' "$err")
if [ -n "$saved" ]; then
	is "$saved:$([ -f "$saved" ] && echo exists)" "$T/res/o.ncfm:exists" \
		"the summary's best model is -o, and it exists"
	skip "-o was written"
else
	like "$err" "^ncf-train: best hr@10 .* before --resume: this run did not improve on it, so $T/res/o.ncfm was not written" \
		"the summary says -o was not written (no resumed epoch beat the best)"
	[ ! -e "$T/res/o.ncfm" ]
	ok $? "... and it is not there"
fi
run ncf-train "$C" --device cpu --resume "$R.epoch-002" -e 4 -o "$T/res/o2.ncfm" -b 7 --dropout 0.1
is "$status" 0 "--resume with shape or hyperparameter options: exit 0"
like "$err" "^ncf-train: --resume: the model's shape and hyperparameters come from $R.epoch-002; ignoring --batch-size 7 \\(the model's: 512\\), --dropout 0.1 \\(0.5\\)$" \
	"... with a warning naming each one ignored and the model's value"
same "$T/res/o2.ncfm.last" "$R.last"
ok $? "... and the same bytes"
run ncf-train "$C" --device cpu --resume "$R.last" -e 4 -o "$T/res/o3.ncfm"
is "$status:$(grep -c 'epoch [0-9]*/4:' "$err")" "0:0" "--resume at the last epoch: exit 0, no epoch run"

# ---------------------------------------------------------------------------
# Interrupted mid-epoch.  Many small batches so that the run lasts a few
# seconds; the signal goes once the "training" line (printed after the
# handlers are installed) is out.
SIGARGS="$F -b 1024 -e 3"
# interrupt SIG DELAY MODEL: start a run, send SIG DELAY seconds after it
# starts training; sets $status and $err.
interrupt() {
	local sig=$1 delay=$2 model=$3 i=0
	err=$T/err.int.$_n
	: >"$err"
	ncf-train "$MLS" -o "$model" $SIGARGS 2>"$err" &
	local pid=$!
	while ! grep -q '^ncf-train: training ' "$err" && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	sleep "$delay"
	kill -"$sig" $pid 2>/dev/null
	wait $pid
	status=$?
}
mkdir "$T/int"
interrupt INT 1 "$T/int/i.ncfm"
if grep -q '^ncf-train: interrupted in epoch' "$err"; then
	is "$status" 130 "SIGINT mid-epoch: exit 130"
	like "$err" "^ncf-train: interrupted in epoch [0-9]+ at position [0-9]+ of [0-9]+; resume with: ncf-train $MLS -o $T/int/i.ncfm --resume $T/int/i.ncfm.last -e 3 " \
		"SIGINT: says where it stopped and the command that resumes it"
	# that command, pasted as it is, resumes the run: every setting it had
	cmd=$(sed -n 's/^ncf-train: interrupted in epoch .*; resume with: //p' "$err")
	run sh -c "$cmd"
	is "$status" 0 "the printed command, run by a shell: exit 0"
	like "$err" "resuming from $T/int/i.ncfm.last at epoch [0-9]+, position [1-9][0-9]* of " \
		"resumes mid-epoch"
	unlike "$err" "ignoring" "... with no setting ignored"
	ncf-train -q "$MLS" -o "$T/int/u.ncfm" $SIGARGS
	same "$T/int/i.ncfm.last" "$T/int/u.ncfm.last"
	ok $? "resumed mid-epoch: MODEL.last is the uninterrupted run's, byte for byte"
else
	diag "the run ended before SIGINT (status $status):" "$(cat "$err")"
	for k in 1 2 3 4 5 6; do skip "the run finished before the signal"; done
fi
interrupt TERM 0.3 "$T/int/t.ncfm"
if grep -q '^ncf-train: interrupted in epoch' "$err"; then
	is "$status" 143 "SIGTERM mid-epoch: exit 143"
	run ncf-eval -m "$T/int/t.ncfm.last" "$MLS"
	is "$status" 0 "the state saved at SIGTERM is a usable checkpoint"
else
	diag "the run ended before SIGTERM (status $status):" "$(cat "$err")"
	skip "the run finished before the signal"
	skip "the run finished before the signal"
fi
# A signal that comes during an epoch's last step or its evaluation stops
# the run after that epoch is saved; with one step per epoch (-b larger
# than the epoch) that is every signal.  The run must still say that it
# was interrupted and where its state is.
err=$T/err.one
: >"$err"
ncf-train "$C" -o "$T/int/one.ncfm" $F -b 100000 -e 300 2>"$err" &
pid=$!
i=0
while ! grep -q '^ncf-train: epoch 3/300:' "$err" && [ $i -lt 400 ]; do
	sleep 0.05
	i=$((i + 1))
done
kill -INT $pid 2>/dev/null
wait $pid
is "$?" 130 "SIGINT with one step per epoch: exit 130"
like "$err" "^ncf-train: .*(interrupted|stopped).*$T/int/one\.ncfm\.last" \
	"SIGINT with one step per epoch: says it stopped and where the state is"

# ---------------------------------------------------------------------------
# --log, the per-epoch lines, the summary, --threshold.
mkdir "$T/log"
run ncf-train "$C" -o "$T/log/m.ncfm" $F -b 512 -e 3 --log "$T/log/log.jsonl"
is "$status" 0 "--log FILE: exit 0"
is "$(wc -c <"$out" | tr -d ' ')" 0 "--log FILE: nothing on stdout"
if [ $have_python = 1 ]; then
	log_lines "$T/log/log.jsonl" 3 $LOGKEYS
	ok $? "--log FILE: one JSON object per epoch with $LOGKEYS, then a summary"
	python3 -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
E, S = L[:-1], L[-1]
assert [d["epoch"] for d in E] == [1, 2, 3]
for d in E:
    assert 0 <= d["hr@10"] <= 1 and 0 <= d["ndcg@10"] <= d["hr@10"]
    assert d["train_loss"] > 0 and d["train_time"] >= 0 and d["eval_time"] >= 0
    assert d["train_throughput"] >= 0 and d["eval_throughput"] >= 0
    assert d["save_wait"] >= 0
# save_time: the write that ended before this epoch did (the previous
# epoch'"'"'s, written while this one trained); none before the first
assert E[0]["save_time"] is None, E[0]["save_time"]
assert all(d["save_time"] is not None and d["save_time"] >= 0 for d in E[1:])
' "$T/log/log.jsonl"
	ok $? "--log FILE: epochs 1, 2, 3; values in range; save_time null, then the writes' times"
	# The summary, against the epochs (4 decimals in the log: tolerances 1e-3
	# on sums of a few of them, and the rounding of train_time on the mean
	# throughput times it).
	python3 -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
E, S = L[:-1], L[-1]
best = max(E, key=lambda d: (d["hr@10"], -d["epoch"]))
assert S["summary"] is True and S["epochs"] == 3
assert S["best_epoch"] == best["epoch"], (S["best_epoch"], best["epoch"])
assert abs(S["best_hr@10"] - best["hr@10"]) < 1e-6 and abs(S["best_ndcg@10"] - best["ndcg@10"]) < 1e-6
assert S["threshold"] is None and S["time_to_target"] is None
tt = sum(d["train_time"] for d in E)
assert abs(S["train_time"] - tt) < 1e-3, (S["train_time"], tt)
# 3 epochs of S samples in train_time, which the log rounds to 1e-4 s
n, m = 3 * int(sys.argv[2]), S["mean_train_throughput"]
assert abs(m * S["train_time"] - n) <= m * 5e-5 + 1e-6 * n + 0.1, (m, S["train_time"], n)
assert S["mean_eval_throughput"] > 0 and S["eval_time"] > 0
assert S["time_to_best_model"] >= sum(d["train_time"] + d["eval_time"] for d in E[:best["epoch"]]) - 1e-3
assert S["last_save_time"] >= 0 and S["last_save_wait"] >= 0
w = sum(d["save_wait"] for d in E) + S["last_save_wait"]
assert abs(S["save_wait"] - w) < 1e-3, (S["save_wait"], w)
' "$T/log/log.jsonl" "$SAMPLES"
	ok $? "--log FILE: the summary: best epoch and HR, mean throughput, times, save_wait summed"
else
	skip "no python3"
	skip "no python3"
	skip "no python3"
fi
# stderr: "epoch E/3: loss L  hr@10 H  ndcg@10 N  train ... eval ...", then
# "best hr@10 H (ndcg@10 N) at epoch E, saved in MODEL; latest state in MODEL.last"
like "$err" "^ncf-train: training .* on .*: $USERS users, $ITEMS items, $SAMPLES samples per epoch, batch 512 \\($(((SAMPLES + 511) / 512)) steps\\)" \
	"stderr: what is trained, the samples per epoch and the steps"
is "$(grep -cE '^ncf-train: epoch [1-3]/3: loss [0-9.]+  hr@10 [0-9.]+  ndcg@10 [0-9.]+  train [0-9.]+ s .*eval [0-9.]+ s' "$err")" 3 \
	"stderr: one line per epoch with loss, hr@10, ndcg@10, train and eval times"
want=$(awk '/ epoch [0-9]+\/3: / { split($3, e, "/"); h = $7; if (n == 0 || h + 0 > best + 0) { best = h; be = e[1]; bn = $9 } n++ }
	END { printf "%s %s %s", best, bn, be }' "$err")
got=$(sed -n 's/^ncf-train: best hr@10 \([0-9.]*\) (ndcg@10 \([0-9.]*\)) at epoch \([0-9]*\), saved in .*/\1 \2 \3/p' "$err")
is "$got" "$want" "summary: the best hr@10, its ndcg@10 and its (first) epoch"
like "$err" "saved in $T/log/m.ncfm; latest state in $T/log/m.ncfm.last" "summary: names MODEL and MODEL.last"
like "$err" '^ncf-train: train throughput: mean .* samples/s, best .* samples/s over 3 epochs' \
	"summary: throughput over 3 epochs"
besth=$(grep 'epoch [0-9]*/3: .*  best$' "$err" | tail -n 1 | awk '{ print $7 }')
is "$besth" "${got%% *}" "the last line marked 'best' has the summary's hr@10"
run ncf-eval -m "$T/log/m.ncfm" "$C"
is "$(awk -F'\t' '$1 == "hr@10" { printf "%.4f", $2 }' "$out")" "${got%% *}" \
	"ncf-eval of MODEL gives the summary's best hr@10"

run ncf-train -q "$C" -o "$T/log/q.ncfm" $F -b 512 -e 2 --log -
is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--log - with -q: exit 0, nothing on stderr"
if [ $have_python = 1 ]; then
	cp "$out" "$T/log/stdout.jsonl"
	log_lines "$T/log/stdout.jsonl" 2 $LOGKEYS
	ok $? "--log -: one JSON object per epoch and the summary on stdout, nothing else"
else skip "no python3"; fi

run ncf-train "$C" -o "$T/log/t.ncfm" $F -b 512 -e 5 -t 0.01 --log "$T/log/t.jsonl"
is "$status" 0 "--threshold 0.01: exit 0"
is "$(grep -c '"epoch"' "$T/log/t.jsonl")" 1 "--threshold 0.01: stops after one epoch (one epoch object)"
is "$(grep -c 'epoch [0-9]*/5:' "$err")" 1 "--threshold 0.01: one epoch line on stderr"
like "$err" '^ncf-train: reached the threshold 0\.0100 at epoch 1 after [0-9.]+ s of the run \(time to target\)' \
	"--threshold: says so, with the time to target"
if [ $have_python = 1 ]; then
	python3 -c '
import json, sys
E, S = [json.loads(l) for l in open(sys.argv[1])]
assert S["threshold"] == 0.01 and S["best_epoch"] == 1
# from the start of training to the end of epoch 1'"'"'s evaluation: at least
# its training and evaluation, and the stderr line says the same (2 decimals)
assert S["time_to_target"] >= E["train_time"] + E["eval_time"] - 1e-3, S
assert abs(S["time_to_target"] - float(sys.argv[2])) <= 0.006, (S["time_to_target"], sys.argv[2])
' "$T/log/t.jsonl" "$(sed -n 's/.*at epoch 1 after \([0-9.]*\) s of the run.*/\1/p' "$err")"
	ok $? "--threshold: the summary's time_to_target, as on stderr"
else skip "no python3"; fi
run ncf-train "$C" -o "$T/log/t2.ncfm" $F -b 512 -e 2 -t 0.999
is "$status:$(grep -c 'epoch [0-9]*/2:' "$err")" "0:2" "--threshold 0.999: runs every epoch"
like "$err" '^ncf-train: did not reach the threshold 0\.9990' "--threshold not reached: says so"
run ncf-train -q "$C" -o "$T/log/t3.ncfm" $F -b 512 -e 1 -t 0.999 --log -
like "$out" '"threshold": 0\.9990, "time_to_target": null' "--threshold not reached: time_to_target null"


# ---------------------------------------------------------------------------
# A batch larger than the epoch: one step of all samples per epoch.
mkdir "$T/big"
run ncf-train "$C" -o "$T/big/m.ncfm" $F -b 100000 -e 2 --keep-epochs
is "$status" 0 "-b 100000 (> $SAMPLES samples): exit 0"
like "$err" "batch \\(100000\\) is larger than an epoch \\($SAMPLES samples\\): each epoch is one step over all samples; for about [0-9]+ steps an epoch give -b [0-9]+$" \
	"says each epoch is one step, and a batch of about 20 steps an epoch"
b=$(sed -n 's/.* give -b \([0-9]*\)$/\1/p' "$err")
[ "$b" -gt 0 ] && [ $((SAMPLES / b)) -ge 20 ] && [ $((SAMPLES / b)) -lt 40 ]
ok $? "-b $b gives from 20 to 40 steps of an epoch of $SAMPLES"
like "$err" 'batch 100000 \(1 steps?\)' "the training line counts one step"
ncf-eval -q -m "$T/big/m.ncfm.epoch-001" --scores "$T/big/s1" "$C" >/dev/null &&
	ncf-eval -q -m "$T/big/m.ncfm.epoch-002" --scores "$T/big/s2" "$C" >/dev/null
ok $? "ncf-eval --scores of the models after epochs 1 and 2"
! cmp -s "$T/big/s1" "$T/big/s2"
ok $? "the model after 2 epochs scores differently from after 1 (a step was made)"

# ---------------------------------------------------------------------------
# Usage errors: exit 2, one line naming the problem, then the synopsis, and
# no output file.
mkdir "$T/use"
usage() {
	local regex=$1 desc=$2
	shift 2
	run ncf-train "$C" -o "$T/use/m.ncfm" "$@"
	is "$status" 2 "$desc: exit 2"
	like "$err" "^ncf-train: $regex" "$desc: message"
	like "$err" '^usage: ncf-train' "$desc: synopsis"
	is "$(ls -A "$T/use")" "" "$desc: no output"
}
usage "--batch-size: '0' is not an integer from 1 " "-b 0" -b 0
usage "--layers: the first size \(15\) .* must be even" "--layers 15,8" --layers 15,8
usage "--layers needs at least two sizes" "--layers 16" --layers 16
usage "--learning-rate: '-1' is not a number in \(0, " "--learning-rate -1" --learning-rate -1
usage "--dropout: '1' is not a number in \[0, 1\)" "--dropout 1" --dropout 1
usage "--dropout: '1.5' is not a number in \[0, 1\)" "--dropout 1.5" --dropout 1.5
usage "unknown option '--bogus'" "unknown option" --bogus
usage "--epochs: 'x' is not an integer" "--epochs x" -e x
run ncf-train "$C"
is "$status" 2 "no -o: exit 2"
like "$err" '^ncf-train: no output model given \(-o MODEL\)' "no -o: message"
run ncf-train --help
is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--help: exit 0, nothing on stderr"
like "$out" '^usage: ncf-train' "--help: usage on stdout"

# ---------------------------------------------------------------------------
# A model and a cache that do not belong together.
M=$T/log/m.ncfm
run ncf-eval -m "$M" "$MLS"
is "$status" 1 "ncf-eval -m on another cache: exit 1"
like "$err" "^ncf-eval: $M and $MLS do not belong together" "ncf-eval -m on another cache: message"
run ncf-train "$MLS" --resume "$M.last" -o "$T/use/x.ncfm"
is "$status" 1 "ncf-train --resume on another cache: exit 1"
like "$err" "^ncf-train: $M.last was trained on another data set than $MLS" \
	"ncf-train --resume on another cache: message"
is "$(ls -A "$T/use")" "" "... and no output"

# Damaged checkpoints: ncf-eval, ncf-infer and ncf-train --resume refuse them.
mkdir "$T/bad"
size=$(wc -c <"$M")
head -c $((size / 2)) "$M" >"$T/bad/truncated.ncfm"
head -c 40 "$M" >"$T/bad/short.ncfm"
cp "$M" "$T/bad/flipped.ncfm"
byte=$(od -An -tu1 -j $((size / 2)) -N 1 "$M" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 16)))" |
	dd of="$T/bad/flipped.ncfm" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
cmp -s "$M" "$T/bad/flipped.ncfm"
is "$?" 1 "the bit-flipped copy differs from the model"
: >"$T/bad/empty.ncfm"
cp "$C" "$T/bad/cache.ncfm"
echo '1 33' >"$T/bad/pair"
damaged() {
	local regex=$2 desc=$3 f=$T/bad/$1
	run ncf-eval -m "$f" "$C"
	is "$status" 1 "ncf-eval, $desc: exit 1"
	like "$err" "^ncf-eval: $f: $regex.*\(not a usable ncf-train checkpoint\)$" "ncf-eval, $desc: message"
	run ncf-infer --score -m "$f" "$T/bad/pair"
	is "$status:$(wc -c <"$out" | tr -d ' ')" "1:0" "ncf-infer, $desc: exit 1, no output"
	like "$err" "^ncf-infer: $f: $regex" "ncf-infer, $desc: message"
}
damaged truncated.ncfm 'truncated' "a truncated checkpoint"
damaged short.ncfm 'truncated' "a checkpoint cut in its first section"
damaged flipped.ncfm ".*(corrupt|checksum)" "a bit-flipped checkpoint"
damaged empty.ncfm 'empty file' "an empty file"
# a cache given as a model: what it is and where it goes (ncf-eval and
# ncf-infer say so before reading; the reader's own words for a pipe)
run ncf-eval -m "$T/bad/cache.ncfm" "$C"
is "$status" 1 "ncf-eval, a cache given as a model: exit 1"
like "$err" "^ncf-eval: -m: $T/bad/cache.ncfm is a cache \\(ncf-prep's\\), not a model: the cache is the operand" \
	"ncf-eval, a cache given as a model: says what it is and where it goes"
run ncf-infer --score -m "$T/bad/cache.ncfm" "$T/bad/pair"
is "$status:$(wc -c <"$out" | tr -d ' ')" "1:0" "ncf-infer, a cache given as a model: exit 1, no output"
like "$err" "^ncf-infer: -m: $T/bad/cache.ncfm is a cache" "ncf-infer, a cache given as a model: says so"
run ncf-eval -m - "$C" <"$T/bad/cache.ncfm"
like "$err" "^ncf-eval: <stdin>: an ncf file of another kind \\(NCFCACHE\\)" \
	"a cache piped in as a model: the reader's message"
run ncf-train "$C" --resume "$T/bad/flipped.ncfm" -o "$T/use/x.ncfm"
is "$status" 1 "ncf-train --resume of a bit-flipped checkpoint: exit 1"
like "$err" "^ncf-train: $T/bad/flipped.ncfm: .*(corrupt|checksum)" "... with a message"

# ---------------------------------------------------------------------------
# A NaN loss (a learning rate of 1e30 blows the weights up in the first
# steps): exit 1, a message about the loss, MODEL.last untouched.
mkdir "$T/nan"
cp "$M.last" "$T/nan/m.ncfm.last"
run ncf-train "$C" -o "$T/nan/m.ncfm" $F -b 512 -e 3 --learning-rate 1e30
is "$status" 1 "--learning-rate 1e30: exit 1"
like "$err" '^ncf-train: epoch 1, step [0-9]+: the loss is (NaN|infinite); stopping' \
	"--learning-rate 1e30: the loss goes non-finite and the message says so"
same "$M.last" "$T/nan/m.ncfm.last"
ok $? "an existing MODEL.last is left byte for byte"
is "$(ls -A "$T/nan")" m.ncfm.last "no MODEL and no temporaries left"
mkdir "$T/nan2"
run ncf-train "$C" -o "$T/nan2/m.ncfm" $F -b 512 -e 3 --learning-rate 1e30
is "$status:$(ls -A "$T/nan2")" "1:" "a run failing in its first epoch leaves no file at all"
like "$err" 'the loss is (NaN|infinite); stopping \(no checkpoint was written' \
	"a NaN in the first epoch: the message says no checkpoint was written"

# --device cuda without a usable GPU: exit 3 and why.
if ncf-train -vV | grep -q '^cuda	not built' ||
	! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
	mkdir "$T/dev"
	run ncf-train "$C" -o "$T/dev/m.ncfm" $F --device cuda
	is "$status" 3 "--device cuda without a GPU: exit 3"
	like "$err" '^ncf-train: --device cuda: ' "--device cuda: says why"
	is "$(ls -A "$T/dev")" "" "--device cuda: no output"
else
	skip "a GPU is usable here"
	skip "a GPU is usable here"
	skip "a GPU is usable here"
fi

# ---------------------------------------------------------------------------
# ncf-eval's output.
run ncf-eval -m "$M" "$C"
is "$status" 0 "ncf-eval -m MODEL CACHE: exit 0"
is "$(cut -f1 "$out" | tr '\n' ' ')" "hr@10 ndcg@10 users oracle_hr@10 " \
	"keys hr@10, ndcg@10, users and (synthetic cache) oracle_hr@10"
is "$(awk -F'\t' '$1 == "users" { print $2 }' "$out")" "$USERS" "users $USERS"
awk -F'\t' 'NF != 2 || $2 !~ /^[0-9.]+$/ || ($1 != "users" && ($2 < 0 || $2 > 1)) { exit 1 }' "$out"
ok $? "key<TAB>value lines, rates in [0, 1]"
is "$(awk -F'\t' '$1 == "oracle_hr@10" { print $2 }' "$out")" "$(info oracle_hr@10 "$C")" \
	"oracle_hr@10 is the cache's"
run ncf-eval -m "$M" --topk 5 "$C"
is "$(cut -f1 "$out" | tr '\n' ' ')" "hr@5 ndcg@5 users oracle_hr@10 " "--topk 5: keys hr@5 and ndcg@5"
hr5=$(awk -F'\t' '$1 == "hr@5" { print $2 }' "$out")
run ncf-eval -m "$M" "$C"
hr10=$(awk -F'\t' '$1 == "hr@10" { print $2 }' "$out")
awk -v a="$hr5" -v b="$hr10" 'BEGIN { exit !(a <= b) }'
ok $? "hr@5 ($hr5) <= hr@10 ($hr10)"
run ncf-eval -m "$M" --json "$C"
if [ $have_python = 1 ]; then
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"hr@10", "ndcg@10", "users", "oracle_hr@10"}, d
assert d["users"] == int(sys.argv[3])
assert all(0 <= d[k] <= 1 for k in ("hr@10", "ndcg@10", "oracle_hr@10"))
assert "%.6f" % d["hr@10"] == sys.argv[2]
' "$out" "$hr10" "$USERS"
	ok $? "--json: one valid JSON object with the same numbers"
else skip "no python3"; fi
run ncf-eval --baseline popularity "$C"
is "$status" 0 "--baseline popularity without -m: exit 0"
awk -F'\t' '$1 ~ /^(hr|ndcg)@10$/ && $2 >= 0 && $2 <= 1 { n++ } END { exit n != 2 }' "$out"
ok $? "--baseline popularity: hr@10 and ndcg@10 in [0, 1]"
run ncf-eval --baseline popularity --json "$MLS"
if [ $have_python = 1 ]; then
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert 0 <= d["ndcg@10"] <= d["hr@10"] <= 1 and d["users"] == 610
' "$out"
	ok $? "--baseline popularity --json: valid, ndcg@10 <= hr@10"
else skip "no python3"; fi
run ncf-eval "$C"
is "$status" 2 "ncf-eval without -m or --baseline: exit 2"
run ncf-eval -m "$M" --baseline popularity "$C"
is "$status" 2 "ncf-eval -m with --baseline: exit 2"
run ncf-eval --baseline bogus "$C"
is "$status" 2 "ncf-eval --baseline bogus: exit 2"

# ---------------------------------------------------------------------------
# Versions.
run ncf-train -V
is "$status:$(wc -l <"$out" | tr -d ' ')" "0:1" "-V: exit 0, one line"
like "$out" '^ncf-train \(ncf\) [0-9]+\.[0-9]+' "-V: name and version"
run ncf-train -vV
is "$status" 0 "-vV: exit 0"
like "$out" '^ncf-train \(ncf\) [0-9]+\.[0-9]+' "-vV: the version line"
like "$out" '^features: ' "-vV: a features line"
like "$out" '^(cuda	|zstd	)' "-vV: library versions"

done_testing
