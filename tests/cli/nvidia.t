#!/usr/bin/env bash
# nvidia.t - NVIDIA's option names (ncf(7), NVIDIA'S OPTIONS), every row of
# the table: a name that works means what ncf's spelling means (the same
# model bytes, cache bytes or output as ncf's spelling gives), a refused
# one exits 2 with the line that says ncf's way (tests/expected/nvidia/);
# the table names every option of NVIDIA's ncf.py, convert.py and
# inference.py (read from ../shared/peer when it is there), and this file
# checks every name of the table.  Then what is near NVIDIA's habits: an
# unknown option names the nearest known one, a number where a file goes
# names the option that took what, a name that belongs to another tool
# says which.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

ncf-prep -q --synthetic tiny -o c.ncfc || bail "ncf-prep --synthetic tiny failed"
ncf-prep -q --synthetic tiny --emit-csv -o r.csv || bail "ncf-prep --emit-csv failed"
F="--device cpu --factors 8 --layers 16,16,8 -e 1"
ncf-train -q c.ncfc -o m.ncfm $F -b 512 || bail "ncf-train failed"

# The names this file checks, one per row of the table (the first of a
# row's names; -b1 and -b2 are ncf.py's short beta1 and beta2).
CHECKED=""
checked() { CHECKED="$CHECKED $*"; }

# train_same NAME NVIDIA-ARGS -- NCF-ARGS: one epoch each way, the same
# checkpoint bytes.
train_same() {
	local name=$1 nv=() ours=()
	shift
	while [ "$1" != -- ]; do nv+=("$1"); shift; done
	shift
	ours=("$@")
	rm -f a.ncfm* b.ncfm*
	ncf-train -q c.ncfc -o a.ncfm $F "${nv[@]}" && ncf-train -q c.ncfc -o b.ncfm $F "${ours[@]}" &&
		cmp -s a.ncfm.last b.ncfm.last
	ok $? "ncf-train ${nv[*]}: the same model as ${ours[*]:-no option}"
	checked "$name"
}
# refused TOOL NAME ARGS...: exit 2 (1: REFUSED_STATUS), the line of
# tests/expected/nvidia/TOOL-NAME.err
refused() {
	local tool=$1 name=$2 want=${REFUSED_STATUS:-2}
	shift 2
	run "$tool" "$@"
	is "$status" "$want" "$tool $*: exit $want"
	expect "nvidia/$tool$name.err" "$err" "... saying what to give instead"
	checked "$name"
}
# same_output NAME CMD1 -- CMD2: the same stdout, both exit 0
same_output() {
	local name=$1 a=() b=()
	shift
	while [ "$1" != -- ]; do a+=("$1"); shift; done
	shift
	b=("$@")
	"${a[@]}" >o1 2>e1 && "${b[@]}" >o2 2>e2 && cmp -s o1 o2
	ok $? "${a[*]}: the same output as ${b[*]}"
	checked "$name"
}
# same_head NAME CMD1 -- CMD2: both exit 0 with the same first line on
# stderr (the benchmark's: what it measures) and the same first column
# on stdout (its batch sizes)
same_head() {
	local name=$1 a=() b=()
	shift
	while [ "$1" != -- ]; do a+=("$1"); shift; done
	shift
	b=("$@")
	"${a[@]}" >o1 2>e1 && "${b[@]}" >o2 2>e2 && [ "$(head -n 1 e1)" = "$(head -n 1 e2)" ] &&
		[ "$(cut -f1 o1)" = "$(cut -f1 o2)" ]
	ok $? "${a[*]}: measures what ${b[*]} does"
	checked "$name"
}
# taken NAME CMD...: accepted (exit 0), NVIDIA's spelling being ncf's
taken() {
	local name=$1
	shift
	run "$@"
	is "$status" 0 "$*: exit 0 (spelled as NVIDIA does)"
	checked "$name"
}

# --- ncf.py: ncf-train ------------------------------------------------------
refused ncf-train --data --data d c.ncfc -o x.ncfm
refused ncf-train --feature_spec_file --feature_spec_file f.yaml c.ncfc -o x.ncfm
taken --epochs ncf-train -q c.ncfc -o y.ncfm $F --epochs 1 -b 512
train_same --batch_size --batch_size 256 -- -b 256
refused ncf-train --valid_batch_size --valid_batch_size 4096 c.ncfc -o x.ncfm
taken --factors ncf-train -q c.ncfc -o y.ncfm $F -b 512 --factors 4
refused ncf-train --layers --layers 16 16 8 c.ncfc -o x.ncfm
train_same --negative_samples -b 512 --negative_samples 2 -- -b 512 -n 2
train_same --learning_rate -b 512 --learning_rate 0.01 -- -b 512 -l 0.01
taken --topk ncf-train -q c.ncfc -o y.ncfm $F -b 512 --topk 5
taken --seed ncf-train -q c.ncfc -o y.ncfm $F -b 512 --seed 7
taken --threshold ncf-train -q c.ncfc -o y.ncfm $F -b 512 --threshold 0.9
train_same --beta1 -b 512 --beta1 0.3 -- -b 512 --beta1=0.3
refused ncf-train -b1 -b1 0.25 c.ncfc -o x.ncfm
train_same --beta2 -b 512 --beta2 0.6 -- -b 512 --beta2=0.6
refused ncf-train -b2 c.ncfc -o x.ncfm -b2 0.5
taken --eps ncf-train -q c.ncfc -o y.ncfm $F -b 512 --eps 1e-7
taken --dropout ncf-train -q c.ncfc -o y.ncfm $F -b 512 --dropout 0.1
refused ncf-train --checkpoint_dir --checkpoint_dir ckpt c.ncfc -o x.ncfm
train_same --load_checkpoint_path -b 512 --load_checkpoint_path m.ncfm -- -b 512 --init m.ncfm
train_same --mode -b 512 --mode train -- -b 512
refused ncf-train --mode --mode test c.ncfc -o x.ncfm
train_same --grads_accumulated -b 512 --grads_accumulated 1 -- -b 512
refused ncf-train --grads_accumulated --grads_accumulated 4 c.ncfc -o x.ncfm
run ncf-train -q c.ncfc -o y.ncfm $F -b 512 --amp
[ "$status" = 0 ] || [ "$status" = 3 ]
ok $? "ncf-train --amp: taken (exit 0, or 3 where this CPU has no bf16)"
checked --amp
rm -f l1 l2
# metrics LOG: the loss and metrics of each line (the times differ run to run)
metrics() { grep -o '"train_loss": [0-9.]*, "hr@10": [0-9.]*, "ndcg@10": [0-9.]*' "$1"; }
ncf-train -q c.ncfc -o a.ncfm $F -b 512 --log_path l1 && ncf-train -q c.ncfc -o b.ncfm $F -b 512 --log l2 &&
	cmp -s a.ncfm.last b.ncfm.last && [ "$(wc -l <l1)" = 2 ] && [ -n "$(metrics l1)" ] &&
	[ "$(metrics l1)" = "$(metrics l2)" ]
ok $? "ncf-train --log_path F: the log --log F writes (an epoch and the summary; but for the times)"
checked --log_path

# --- ncf.py --mode test: ncf-eval --------------------------------------------
same_output --load_checkpoint_path ncf-eval --load_checkpoint_path m.ncfm c.ncfc -- ncf-eval -m m.ncfm c.ncfc
same_output --mode ncf-eval --mode test -m m.ncfm c.ncfc -- ncf-eval -m m.ncfm c.ncfc
refused ncf-eval --mode --mode train -m m.ncfm c.ncfc
refused ncf-eval --data --data d -m m.ncfm c.ncfc
refused ncf-eval --valid_batch_size --valid_batch_size 1024 -m m.ncfm c.ncfc
refused ncf-eval --log_path --log_path l.json -m m.ncfm c.ncfc

# --- convert.py: ncf-prep ----------------------------------------------------
same_output --path ncf-prep -q --path r.csv -- ncf-prep -q r.csv
mkdir -p out
# a directory as -o: exit 1, as any -o that cannot be created
REFUSED_STATUS=1 refused ncf-prep --output --path r.csv --output out
ncf-prep -q --valid_negative 5 -o p1.ncfc r.csv && ncf-prep -q --eval-negatives 5 -o p2.ncfc r.csv &&
	cmp -s p1.ncfc p2.ncfc
ok $? "ncf-prep --valid_negative 5: the cache of --eval-negatives 5"
checked --valid_negative
ncf-prep -q -s 3 -o p1.ncfc r.csv && ncf-prep -q --seed 3 -o p2.ncfc r.csv && cmp -s p1.ncfc p2.ncfc &&
	! ncf-prep -q -o p3.ncfc r.csv | cmp -s - p1.ncfc
ok $? "ncf-prep -s 3: the cache of --seed 3 (and not of the default seed)"
checked --seed

# --- inference.py: ncf-infer --bench ------------------------------------------
B="--bench --device cpu -b 64,256 --warmup 1 --iterations 2"
R="--bench --device cpu --random-model --users 100 --items 50 -b 64 --warmup 1 --iterations 2"
same_head --load_checkpoint_path ncf-infer $B --load_checkpoint_path m.ncfm -- ncf-infer $B -m m.ncfm
same_head --n_users ncf-infer $R --n_users 70 -- ncf-infer $R --users 70
same_head --n_items ncf-infer $R --n_items 30 -- ncf-infer $R --items 30
taken --factors ncf-infer -q $R -f 4
refused ncf-infer --dropout $R --dropout 0.5
taken --layers ncf-infer -q $R --layers 32,16,8
refused ncf-infer --layers $R --layers 32 16 8
same_head --batch_sizes ncf-infer $B -m m.ncfm --batch_sizes 32,128 -- ncf-infer $B -m m.ncfm -b 32,128
same_head --num_batches ncf-infer --bench --device cpu -m m.ncfm -b 64 --num_batches 13 -- \
	ncf-infer --bench --device cpu -m m.ncfm -b 64 --warmup 10 --iterations 3
run ncf-infer --bench --device cpu -m m.ncfm -b 64 --num_batches 13
is "$(awk -F'\t' 'NR == 2 { print $NF }' "$out")" 3 "--num_batches 13: 3 timed passes (10 warm-up)"
# (no --device cpu: there fp16 is refused, exit 3; auto computes fp32 and says so)
B16="--bench -b 64,256 --warmup 1 --iterations 2"
same_head --fp16 ncf-infer $B16 -m m.ncfm --fp16 -- ncf-infer $B16 -m m.ncfm --precision fp16
refused ncf-infer --log_path $R --log_path l.json

# --- the table, the scripts and this file name the same options ---------------
# names A B...: one per line, sorted, unique
names() { printf '%s\n' "$@" | sed '/^$/d' | sort -u; }
table=$(sed -n '/^\.SH NVIDIA.S OPTIONS/,/^\.SH /p' "$NCF_ROOT/man/ncf.7" |
	sed -n '/^\.TS/,/^\.TE/p' | grep -v '^\.' | cut -f1 | sed 's/\\-/-/g' |
	grep -oE -- '(^|, )--?[a-z0-9_]+' | sed 's/^, //')
is "$(names $table | tr '\n' ' ')" "$(names $CHECKED -e -b -f -n -l -k -s -t | tr '\n' ' ')" \
	"ncf(7)'s table names the options this file checks"
PEER=$NCF_ROOT/../shared/peer/nvidia-ncf-pytorch
if [ -d "$PEER" ]; then
	peer=$(cat "$PEER/ncf.py" "$PEER/convert.py" "$PEER/inference.py" |
		grep -oE "add_argument\('[^)]*" | grep -oE "'--?[a-z0-9_]+'" | tr -d "'")
	is "$(names $peer | tr '\n' ' ')" "$(names $table | tr '\n' ' ')" \
		"ncf(7)'s table names every option of NVIDIA's ncf.py, convert.py and inference.py"
else
	skip "no ../shared/peer/nvidia-ncf-pytorch"
fi

# --- near NVIDIA's habits ----------------------------------------------------
run ncf-eval --learning_rate 0.1 -m m.ncfm c.ncfc
expect nvidia/other-tool.err "$err" "ncf-eval --learning_rate: it is ncf-train's --learning-rate"
run ncf-train --batchsize 512 c.ncfc -o x.ncfm
expect nvidia/nearest.err "$err" "an unknown option: the nearest known one"
run ncf-infer --bench --random-model --num-batches 20
expect nvidia/nearest-infer.err "$err" "--num-batches: the nearest known, --num_batches"
run ncf-train -e3 5 c.ncfc -o x.ncfm
expect nvidia/number-operand.err "$err" "a number where the cache goes: which option took what"
is "$(ls x.ncfm* 2>/dev/null)" "" "no refused command wrote a model"

done_testing
