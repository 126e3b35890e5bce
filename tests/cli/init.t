#!/usr/bin/env bash
# init.t - ncf-train --init MODEL: a new run from a model's weights
# (fine-tuning).  With a learning rate too small to move a float (1e-30)
# the run's model scores exactly as the one it started from, which shows
# the weights were taken as they are: from an ncf model on its own cache,
# onto a cache of more users and items (rows matched by original id: the
# model's users and items score as before), from a safetensors file with
# NVIDIA's names (with ids, and without: row for row); the same with ids
# that are text (names), matched by their text.  A fine-tuned run
# trains (HR@10 printed), resumes exactly, and NVIDIA's
# --load_checkpoint_path is --init.  Refused, with the messages in
# tests/expected/init/: a shape given that is not the model's, a cache
# that lacks some of the model's ids (numbers, or names said as they are
# written), a model without ids on a cache of
# other counts, --init with --resume, a cache given to --init, -o the
# --init file.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

TOOLS=$NCF_ROOT/build/tests/tools
F="--device cpu -b 512"
S="--factors 8 --layers 16,16,8"
ncf-prep -q --synthetic tiny --emit-csv -o big.csv || bail "ncf-prep --emit-csv failed"
# the same ratings less users 46..50 and items above 300: fewer users and items
awk -F, 'NR == 1 || ($1 <= 45 && $2 <= 300)' big.csv >small.csv
ncf-prep -q -o small.ncfc small.csv && ncf-prep -q -o big.ncfc big.csv || bail "ncf-prep failed"
ncf-train -q $F $S -e 2 small.ncfc -o m.ncfm || bail "ncf-train small.ncfc failed"
ncf-train -q $F $S -e 1 big.ncfc -o mbig.ncfm || bail "ncf-train big.ncfc failed"
# the small cache's every (user, item) of its candidates, by original id
ncf-eval -q --device cpu --scores base.scores -m m.ncfm small.ncfc >base.metrics ||
	bail "ncf-eval failed"
cut -f 1,2 base.scores | tr '\t' ' ' >pairs
ncf-infer -q --device cpu --score -m m.ncfm pairs >base.p || bail "ncf-infer --score failed"
hr() { sed -n 's/^hr@10\t//p' "$1"; }

# --- the same cache ----------------------------------------------------------
run ncf-train $F -e 1 -l 1e-30 --init m.ncfm small.ncfc -o z.ncfm
is "$status" 0 "--init m.ncfm on its own cache: exit 0"
like "$err" "^ncf-train: --init m.ncfm: starting from its weights \(--factors 8 --layers 16,16,8\) on the cache's [0-9]+ users and [0-9]+ items, with a fresh optimizer and this run's settings$" \
	"... saying where it starts from"
ncf-eval -q --device cpu --scores z.scores -m z.ncfm small.ncfc >/dev/null
cmp -s z.scores base.scores
ok $? "learning rate 1e-30: every candidate's score is the model's, bit for bit"
run ncf-train $F -e 2 --init m.ncfm small.ncfc -o f.ncfm
is "$status" 0 "fine-tuned for 2 epochs with the run's own settings: exit 0"
run ncf-eval --device cpu -m f.ncfm small.ncfc
diag "HR@10: the model $(hr base.metrics), fine-tuned $(hr "$out")"
"$TOOLS/ckpt_diff" --by-id m.ncfm f.ncfm >f.diff
is "$(tr '\n' ' ' <f.diff)" "missing	0 identical	0 " "... and it trained: the weights moved"
# the optimizer starts fresh: a run from --init is a run of its own,
# resumed exactly as any other
ncf-train -q $F -e 1 --init m.ncfm small.ncfc -o r1.ncfm &&
	ncf-train -q --device cpu -e 2 small.ncfc --resume r1.ncfm.last -o r1.ncfm
cmp -s r1.ncfm.last f.ncfm.last
ok $? "one epoch from --init, then --resume to two: the bytes of the two-epoch run"
run ncf-train $F -e 1 --init m.ncfm $S small.ncfc -o s.ncfm
is "$status" 0 "the model's own shape given (--factors 8 --layers 16,16,8): taken"

# --- a cache of more users and items: rows matched by original id ----------
run ncf-train $F -e 1 -l 1e-30 --init m.ncfm big.ncfc -o zb.ncfm
is "$status" 0 "--init m.ncfm on a cache of more users and items: exit 0"
like "$err" "starting from its weights \(--factors 8 --layers 16,16,8\) for 45 of the cache's 50 users and [0-9]+ of its 197 items, matched by original id \(the others start as a fresh model's, seed 1\)" \
	"... saying how many of the cache's users and items it had"
# (their scores may differ in the last bit: the scoring tables' products
# have another height, ARCHITECTURE.md; the weights are compared)
"$TOOLS/ckpt_diff" --by-id m.ncfm zb.ncfm >zb.diff
is "$(tr '\n' ' ' <zb.diff)" "missing	0 identical	1 " \
	"the model's users' and items' rows, by original id, and its dense layers: bit for bit"
run ncf-train $F -e 2 --init m.ncfm big.ncfc -o fb.ncfm
is "$status" 0 "fine-tuned on the larger cache: exit 0"
run ncf-eval --device cpu -m fb.ncfm big.ncfc
ok $status "... and evaluated on it: HR@10 $(hr "$out")"

# --- safetensors with NVIDIA's names ------------------------------------------
ncf-infer -q -m m.ncfm --export m.safetensors || bail "ncf-infer --export failed"
run ncf-train $F -e 1 -l 1e-30 --init m.safetensors big.ncfc -o zs.ncfm
"$TOOLS/ckpt_diff" --by-id m.ncfm zs.ncfm >zs.diff
is "$status:$(tr '\n' ' ' <zs.diff)" "0:missing	0 identical	1 " \
	"--init m.safetensors (exported, with ids) onto the larger cache: the model's rows and layers"
PY=$(command -v python3)
if [ -n "$PY" ]; then
	# NVIDIA's own: the state_dict alone, no metadata, so no ids
	"$PY" - m.safetensors nv.safetensors <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
h.pop("__metadata__")
hdr = json.dumps(h, separators=(",", ":")).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + b[8 + n:])
EOF
	run ncf-train $F -e 1 -l 1e-30 --init nv.safetensors small.ncfc -o zn.ncfm
	is "$status" 0 "--init with NVIDIA's state_dict (no ids) on a cache of its counts: exit 0"
	like "$err" "nv.safetensors has no original ids: its rows are taken as small.ncfc's" \
		"... saying that its rows are taken as the cache's"
	ncf-eval -q --device cpu --scores zn.scores -m zn.ncfm small.ncfc >/dev/null
	cmp -s zn.scores base.scores
	ok $? "... and scoring as the model, bit for bit"
	run ncf-train $F -e 2 --init nv.safetensors small.ncfc -o fn.ncfm
	run ncf-eval --device cpu -m fn.ncfm small.ncfc
	ok $status "fine-tuned from NVIDIA's state_dict: HR@10 $(hr "$out") (the model's $(hr base.metrics))"
	run ncf-train $F -e 1 --init nv.safetensors big.ncfc -o x.ncfm
	is "$status" 1 "a model without ids on a cache of other counts: exit 1"
	expect init/noids-counts.err "$err" "... saying why and what to give"
else
	for k in 1 2 3 4 5 6; do skip "no python3 to write a state_dict without metadata"; done
fi

# --- ids that are text: the same ratings with named users and items ---------
awk -F, 'BEGIN { OFS = "," } NR == 1 { print "user,item,rating,timestamp"; next }
	{ $1 = "u" $1; $2 = "m" $2; print }' big.csv >nbig.csv
awk -F, 'NR == 1 || (substr($1, 2) + 0 <= 45 && substr($2, 2) + 0 <= 300)' nbig.csv >nsmall.csv
ncf-prep -q -o nsmall.ncfc nsmall.csv && ncf-prep -q -o nbig.ncfc nbig.csv ||
	bail "ncf-prep of the named ratings failed"
ncf-train -q $F $S -e 2 nsmall.ncfc -o n.ncfm && ncf-train -q $F $S -e 1 nbig.ncfc -o nb.ncfm ||
	bail "ncf-train of the named caches failed"
run ncf-train $F -e 1 -l 1e-30 --init n.ncfm nbig.ncfc -o nz.ncfm
is "$status" 0 "--init of a named model onto a larger named cache: exit 0"
like "$err" "for 45 of the cache's 50 users and [0-9]+ of its 197 items, matched by original id" \
	"... its 45 users among the cache's 50, by name"
"$TOOLS/ckpt_diff" --by-id n.ncfm nz.ncfm >nz.diff
is "$(tr '\n' ' ' <nz.diff)" "missing	0 identical	1 " \
	"... the model's rows, by name, and its dense layers: bit for bit"
ncf-infer -q -m n.ncfm --export n.safetensors || bail "ncf-infer --export of a named model failed"
run ncf-train $F -e 1 -l 1e-30 --init n.safetensors nbig.ncfc -o nzs.ncfm
"$TOOLS/ckpt_diff" --by-id n.ncfm nzs.ncfm >nzs.diff
is "$status:$(tr '\n' ' ' <nzs.diff)" "0:missing	0 identical	1 " \
	"... and from its safetensors (ncf.user_names, ncf.item_names): the same rows"
rm -f x.ncfm x.ncfm.last
run ncf-train $F -e 1 --init nb.ncfm nsmall.ncfc -o x.ncfm
is "$status" 1 "a named cache lacking some of a named model's ids: exit 1"
expect init/ids-missing-names.err "$err" "... the first missing user and item said by name"
[ ! -e x.ncfm ] && [ ! -e x.ncfm.last ]
ok $? "... and no model written"

# --- NVIDIA's name ------------------------------------------------------------
ncf-train -q $F -e 1 --load_checkpoint_path m.ncfm small.ncfc -o nv1.ncfm &&
	ncf-train -q $F -e 1 --init m.ncfm small.ncfc -o nv2.ncfm && cmp -s nv1.ncfm nv2.ncfm
ok $? "ncf.py's --load_checkpoint_path is --init: the same model"

# --- refusals -----------------------------------------------------------------
# refused NAME STATUS ARGS...: the status, the message in init/NAME.err, no model
refused() {
	local name=$1 want=$2
	shift 2
	rm -f x.ncfm x.ncfm.last
	run ncf-train "$@"
	is "$status" "$want" "$name: exit $want"
	expect "init/$name.err" "$err" "... $name: the message"
	[ ! -e x.ncfm ] && [ ! -e x.ncfm.last ]
	ok $? "... and no model written"
}
refused factors 1 $F --init m.ncfm --factors 16 small.ncfc -o x.ncfm
refused layers 1 $F --init m.ncfm --layers 32,16 small.ncfc -o x.ncfm
refused shape 1 $F --init m.ncfm --factors 4 --layers 8,4 small.ncfc -o x.ncfm
refused ids-missing 1 $F --init mbig.ncfm small.ncfc -o x.ncfm
refused with-resume 2 $F --init m.ncfm --resume m.ncfm.last small.ncfc -o x.ncfm
refused cache 1 $F --init small.ncfc small.ncfc -o x.ncfm
refused swapped 1 $F --init small.ncfc m.ncfm -o x.ncfm
refused same-file 2 $F --init m.ncfm small.ncfc -o m.ncfm
run ncf-train $F --init missing.ncfm small.ncfc -o x.ncfm
is "$status" 1 "--init of a file that is not there: exit 1"
done_testing
